"""Protocol unit tests: make ``tests.support`` importable when this directory runs alone.

tests/unit has no ``__init__.py``, so pytest's rootdir-relative import puts only this directory
on ``sys.path``; the repository root (which holds the ``tests`` package) is added here.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
