"""The seams between layers: shared value objects and the Protocols each layer implements.

Only :mod:`gateway.wiring` (the composition root) wires concrete classes to these Protocols;
every other module depends on the Protocol. This package imports nothing from the gateway except
:mod:`gateway.errors`, so every layer may import it without breaking the layer rules
(``tests/test_layers.py``). What each module offers is its ``__all__``, written there once;
this package offers all of them.
"""

from __future__ import annotations

from gateway.seams import (
    approvals,
    backends,
    callers,
    consent,
    guarded,
    listening,
    pending,
    policy,
    questions,
    requests,
    surface,
    task_relay,
)
from gateway.seams.approvals import *
from gateway.seams.backends import *
from gateway.seams.callers import *
from gateway.seams.consent import *
from gateway.seams.guarded import *
from gateway.seams.listening import *
from gateway.seams.pending import *
from gateway.seams.policy import *
from gateway.seams.questions import *
from gateway.seams.requests import *
from gateway.seams.surface import *
from gateway.seams.task_relay import *

__all__: list[str] = []
__all__ += approvals.__all__
__all__ += backends.__all__
__all__ += callers.__all__
__all__ += consent.__all__
__all__ += guarded.__all__
__all__ += listening.__all__
__all__ += pending.__all__
__all__ += policy.__all__
__all__ += questions.__all__
__all__ += requests.__all__
__all__ += surface.__all__
__all__ += task_relay.__all__
