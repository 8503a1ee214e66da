"""The group's /readyz: the workers' per-backend reports as one (gateway/workers/group_ops.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from gateway.backend.credentials.assertion_keys import GatewayKeys
from gateway.config import load_config
from gateway.observability.group_metrics import GroupMetrics
from gateway.outbound.client import Outbound
from gateway.workers.group import Group, GroupRevocations
from gateway.workers.group_ops import (
    build_group_ops_app,
    merge_backend_reports,
    merge_issuer_reports,
)
from tests.support.assertion_verifier import write_key

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"


def entry(*, ready: bool = True, era: str | None = "modern", tools: int = 4, age: float = 1.0):  # type: ignore[no-untyped-def]
    return {"ready": ready, "era": era, "tools": tools, "hidden": 0, "catalog_age_s": age}


def test_a_backend_is_ready_only_on_every_worker_and_shows_the_worst_figures() -> None:
    merged = merge_backend_reports(
        [
            {"docs": entry(tools=4, age=3.0), "tickets": entry()},
            {"docs": entry(tools=3, age=9.5), "tickets": entry(ready=False, era=None)},
        ],
        2,
    )
    assert merged["docs"] == {
        "ready": True,
        "era": "modern",
        "tools": 3,
        "hidden": 0,
        "catalog_age_s": 9.5,
    }
    assert merged["tickets"]["ready"] is False
    assert merged["tickets"]["era"] is None  # the workers disagree


def test_a_backend_missing_from_a_workers_report_is_not_ready() -> None:
    merged = merge_backend_reports([{"docs": entry()}, None], 2)
    assert merged["docs"]["ready"] is False
    assert merge_backend_reports([{"docs": entry()}, {"docs": entry()}], 2)["docs"]["ready"]


def test_the_catalog_lock_report_is_the_one_of_the_worker_holding_the_most() -> None:
    caught_up = {"on_change": "hold", "held": 0, "differences": []}
    holding = {"on_change": "hold", "held": 2, "differences": [{"name": "a"}, {"name": "b"}]}
    merged = merge_backend_reports(
        [
            {"docs": {**entry(), "catalog_lock": caught_up}},
            {"docs": {**entry(), "catalog_lock": holding}},
        ],
        2,
    )
    assert merged["docs"]["catalog_lock"] == holding
    assert "catalog_lock" not in merge_backend_reports([{"docs": entry()}], 1)["docs"]


def test_an_issuer_is_ready_only_on_every_worker_with_the_first_reason_and_fewest_keys() -> None:
    a = {"url": "https://a.example", "tokens": "jwt", "ready": True, "keys": 3}
    b = {"url": "https://b.example", "tokens": "introspection", "ready": True}
    merged = merge_issuer_reports(
        [
            [a, b],
            [{**a, "keys": 2}, {**b, "ready": False, "reason": "issuer metadata not loaded"}],
        ],
        2,
    )
    assert merged == [
        {"url": "https://a.example", "tokens": "jwt", "ready": True, "keys": 2},
        {
            "url": "https://b.example",
            "tokens": "introspection",
            "ready": False,
            "reason": "issuer metadata not loaded",
        },
    ]
    assert merge_issuer_reports([[a], None], 2)[0]["ready"] is False


async def test_the_groups_ops_listener_publishes_the_workers_assertion_keys(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    write_key(tmp_path / "assertion.pem")
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    (tmp_path / "gateway.yaml").write_text(
        "resource: https://mcp.example.com/mcp\n"
        "issuer: {url: https://id.example.com, tokens: jwt}\n"
        "backend:\n"
        "  url: https://tools.example.com/mcp\n"
        "  credential: {type: bearer, token: {env: TOKEN}}\n"
        "  identity: {assertion: {key: {file: assertion.pem}}}\n"
        "policy: policy.yaml\n"
    )
    config = load_config(tmp_path / "gateway.yaml", {"TOKEN": "t"})
    outbound = Outbound()
    group = Group(config, [], outbound, GroupMetrics(1, "test"))
    app = build_group_ops_app(group, GroupRevocations(group, tmp_path), None)
    client = await aiohttp_client(app)
    response = await client.get("/.well-known/jwks.json")
    assert response.status == 200
    assert (await response.json(content_type=None)) == GatewayKeys.from_config(config).jwks()
    await outbound.close()
