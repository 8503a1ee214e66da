"""``limits:``, typed and declared: request size, concurrency, deadlines and rate limits, and the
rate type the issuers' failed-auth budget shares."""

from dataclasses import dataclass, field
from typing import Annotated, Self

from gateway.config.declare import Key, Seconds
from gateway.jsonkit.read import JsonLimits

__all__ = ["JsonLimits", "Limits", "Rate", "RateLimit", "parse_rate"]


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` events per ``per_s`` seconds (parsed from ``N/second|minute|hour``)."""

    count: int
    per_s: float

    @classmethod
    def from_yaml(cls, text: str) -> Self:
        number, _, unit = text.partition("/")
        return cls(int(number), {"second": 1.0, "minute": 60.0, "hour": 3600.0}[unit])


def parse_rate(text: str | None) -> Rate | None:
    return None if text is None else Rate.from_yaml(text)


RateLimit = Annotated[
    Rate | None,
    Key(
        ref="rate",
        schema={
            "description": "N/second, N/minute or N/hour; null disables the limit.",
            "x-message": "is not a rate: write N/second, N/minute or N/hour (null turns the "
            "limit off)",
            "type": ["string", "null"],
            "pattern": "^[1-9][0-9]{0,8}/(second|minute|hour)$",
        },
    ),
]
"""A rate limit key: ``N/second|minute|hour``, or ``null`` for none."""

_IN_FLIGHT = Key(minimum=1, maximum=100_000)


@dataclass(frozen=True, slots=True)
class Limits:
    """``limits:``."""

    max_body_bytes: Annotated[int, Key(minimum=1024, maximum=67_108_864)] = 65_536
    max_response_bytes: Annotated[int, Key(minimum=1024, maximum=268_435_456)] = 1_048_576
    max_in_flight: Annotated[int, _IN_FLIGHT] = 256
    request_deadline_s: Seconds = 15.0
    drain_timeout_s: Seconds = 10.0
    shutdown_delay_s: Annotated[float, Key(minimum=0, maximum=300)] = 0.0
    """On SIGTERM: keep serving (while /readyz says 503) this long before draining, so load
    balancers stop routing here first (Kubernetes removes endpoints asynchronously)."""
    pre_auth_rate: RateLimit = Rate(1200, 60.0)
    principal_rate: RateLimit = Rate(600, 60.0)
    json: Annotated[
        JsonLimits,
        Key(
            fields={
                "max_depth": Key(minimum=4, maximum=64),
                "max_members": Key(minimum=8, maximum=1024),
                "max_array_length": Key(minimum=8, maximum=10_000),
                "max_string_bytes": Key(minimum=256, maximum=1_048_576),
                "max_number_chars": Key(minimum=16, maximum=64),
            }
        ),
    ] = field(default_factory=JsonLimits)
    max_in_flight_per_principal: Annotated[int | None, _IN_FLIGHT] = None
    """None: a quarter of ``max_in_flight`` (see :attr:`principal_in_flight`)."""
    max_in_flight_per_ip: Annotated[int | None, _IN_FLIGHT] = None
    """None: a quarter of ``max_in_flight`` (see :attr:`ip_in_flight`)."""
    max_subscriptions: Annotated[int, _IN_FLIGHT] = 1024
    """Open ``subscriptions/listen`` and legacy GET streams per replica (also each backend's
    listen pool); a quarter of it, the legacy GET streams one subject may have attached."""
    max_subscriptions_per_principal: Annotated[int, Key(minimum=1, maximum=1000)] = 4
    """Open ``subscriptions/listen`` streams one subject may hold on a replica (legacy sessions
    take none)."""
    max_subscribed_uris_per_principal: Annotated[int, Key(minimum=1, maximum=10_000)] = 64
    """``resourceSubscriptions`` URIs one subject may hold across its streams on a replica."""
    subscription_lifetime_s: Annotated[float, Key(minimum=10, maximum=86_400)] = 900.0
    """A listen stream ends gracefully after this long (or at the token's expiry, if sooner)."""
    header_timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=300)] = 10.0
    keepalive_timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=3600)] = 75.0
    max_header_bytes: Annotated[int, Key(minimum=16_384, maximum=1_048_576)] = 32_768
    max_connections: Annotated[int, Key(minimum=1, maximum=1_000_000)] = 1024
    max_connections_per_ip: Annotated[int | None, Key(minimum=1, maximum=1_000_000)] = None
    """None: a quarter of ``max_connections`` (see :attr:`ip_connections`)."""
    max_description_chars: Annotated[int, Key(minimum=64, maximum=65_536)] = 2048
    """Longest title or description of a backend's tool, prompt or resource, in characters;
    longer ones are cut (description hygiene, :mod:`gateway.backend.catalog.hygiene`)."""

    @property
    def principal_in_flight(self) -> int:
        """In-flight MCP requests one principal may hold (explicit, or max_in_flight / 4)."""
        return self.max_in_flight_per_principal or _quarter(self.max_in_flight)

    @property
    def ip_in_flight(self) -> int:
        """In-flight MCP requests one client IP may hold (explicit, or max_in_flight / 4)."""
        return self.max_in_flight_per_ip or _quarter(self.max_in_flight)

    @property
    def ip_connections(self) -> int:
        """Open connections one TCP peer may hold (explicit, or max_connections / 4)."""
        return self.max_connections_per_ip or _quarter(self.max_connections)


def _quarter(total: int) -> int:
    return max(1, total // 4)
