"""``python -m gateway.commands``: the ``mcp-gateway`` command without its installed script (the
supervisor of ``serve --workers N`` starts its workers this way)."""

import sys

from gateway.commands.cli import main

sys.exit(main())
