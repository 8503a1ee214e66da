"""``guardrails:``, typed: the named content processors a policy rule can select
(docs/policy.md#guardrails). Built by :mod:`gateway.config.guardrails`."""

from dataclasses import dataclass
from typing import Annotated, Final, Literal

from gateway.config.backend_model import CredentialConfig
from gateway.config.declare import INTERNAL, Key
from gateway.seams import GUARDED_CHECKS, GuardedCheck

__all__ = [
    "GUARDRAIL_CHECKS",
    "GUARDRAIL_NAME_PATTERN",
    "GuardrailCheck",
    "GuardrailConfig",
]

GuardrailCheck = GuardedCheck
"""What a processor is shown (:data:`gateway.seams.GuardedCheck`)."""
GUARDRAIL_CHECKS: Final = GUARDED_CHECKS
GUARDRAIL_NAME_PATTERN: Final = "^[a-z0-9][a-z0-9_-]{0,31}$"
"""A processor's name: a bounded label of metrics, logs and the audit trail."""


@dataclass(frozen=True, slots=True)
class GuardrailConfig:
    """One entry of ``guardrails:``: an HTTP endpoint that answers pass, deny or a changed
    copy of what it is shown (the ExtMCP message set as JSON, docs/policy.md#guardrails)."""

    url: Annotated[str, Key(required=True, min_length=1)]
    """The full check URL; https, or plain http to a loopback or private address with
    ``allow_insecure_http``."""
    allow_insecure_http: bool = False
    credential: Annotated[CredentialConfig | None, Key(schema={"$ref": "#/$defs/credential"})] = (
        None
    )
    """The gateway's own service credential at the processor, the shape of a backend's
    (``bearer`` or ``client_credentials``; the builder refuses ``token_exchange``: the caller's
    token is never sent to a processor)."""
    timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=30)] = 1.0
    """Per exchange, further capped by what is left of the request's deadline."""
    max_body_bytes: Annotated[int, Key(minimum=1024, maximum=16_777_216)] = 1_048_576
    """Largest message sent and largest verdict read; content that would not fit is an error
    (``on_error``), never sent in part."""
    on_error: Literal["deny", "allow"] = "deny"
    """A processor that cannot answer (unreachable, slow, an answer that is not a verdict):
    ``deny`` refuses the request, ``allow`` lets the content pass unchecked."""
    checks: Annotated[frozenset[GuardrailCheck], Key(min_items=1, unique_items=True)] = frozenset(
        GUARDRAIL_CHECKS
    )
    """Which contents a rule that names this processor shows it."""
    claims: Annotated[
        tuple[str, ...],
        Key(max_items=32, unique_items=True, items=Key(min_length=1, max_length=256)),
    ] = ()
    """Claims of the validated token sent with each message (as written, else a dotted path
    into nested objects); only these leave the gateway."""
    max_connections: Annotated[int, Key(minimum=1, maximum=1000)] = 32
    name: Annotated[str, INTERNAL] = ""
    """The key under ``guardrails:``."""
