"""Make ``tests.support`` importable: ``tests/unit`` is not a package (rootdir import mode)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
