"""Hot reload: validate in full then swap; failures keep the old policy; polling sees changes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy import reload as reload_module
from gateway.policy.policy_set import PolicySet
from gateway.policy.reload import PolicyReloader
from tests.support.policy import who, write_text

V1 = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: []}\n"
V2 = V1 + "  notes_add: {scopes: [notes:write]}\n"
BROKEN = V1 + "  notes_add: {scopes: [notes:write], rate_limit: often}\n"

Report = tuple[str, PolicySet | None, list[str]]


class Recorder:
    """Collects ``on_reload`` reports; ``wait`` blocks (bounded) until ``count`` arrived."""

    def __init__(self) -> None:
        self.reports: list[Report] = []

    def __call__(self, outcome: str, policy: PolicySet | None, problems: list[str]) -> None:
        self.reports.append((outcome, policy, problems))

    async def wait(self, count: int) -> None:
        async with asyncio.timeout(5.0):
            # Reports come from the reload worker thread, where an asyncio.Event is not safe.
            while len(self.reports) < count:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    @property
    def outcomes(self) -> list[str]:
        return [outcome for outcome, _, _ in self.reports]


def touch_later(path: Path, text: str) -> None:
    """Rewrite ``path`` and move its mtime forward so coarse file systems see a change too."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    return write_text(tmp_path / "policy.yaml", V1)


class TestReload:
    def test_an_invalid_policy_at_startup_raises_with_every_problem(self, tmp_path: Path) -> None:
        path = write_text(tmp_path / "policy.yaml", BROKEN)
        with pytest.raises(ConfigError) as caught:
            PolicyReloader([path])
        assert caught.value.problems == [
            f'{path}:5:38: tools.notes_add.rate_limit: "often" is not a rate: write N/second, '
            "N/minute or N/hour"
        ]

    def test_a_valid_reload_swaps_the_policy_and_reports_success(self, policy_file: Path) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        old = reloader.current()
        assert recorder.reports == []  # the initial load is not a reload
        touch_later(policy_file, V2)
        assert reloader.reload() is True
        new = reloader.current()
        assert new is not old and new.version != old.version
        assert recorder.reports == [("success", new, [])]
        assert new.decide_tool(who("mcp:access notes:write"), "notes_add").allowed

    def test_a_request_in_flight_keeps_the_policy_it_took(self, policy_file: Path) -> None:
        reloader = PolicyReloader([policy_file])
        taken = reloader.current()
        touch_later(policy_file, V2)
        reloader.reload()
        # The object the request holds is untouched: still no rule for notes_add.
        assert taken.decide_tool(who("mcp:access notes:write"), "notes_add").reason == "no_rule"
        assert reloader.current().decide_tool(who("mcp:access notes:write"), "notes_add").allowed

    def test_a_broken_reload_keeps_the_old_policy_and_reports_the_line(
        self, policy_file: Path
    ) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        old = reloader.current()
        touch_later(policy_file, BROKEN)
        assert reloader.reload() is False
        assert reloader.current() is old
        assert recorder.reports == [
            (
                "failure",
                None,
                [
                    f'{policy_file}:5:38: tools.notes_add.rate_limit: "often" is not a rate: '
                    "write N/second, N/minute or N/hour"
                ],
            )
        ]

    def test_reloading_unchanged_content_reports_unchanged_and_keeps_the_object(
        self, policy_file: Path
    ) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        old = reloader.current()
        # Reformatting without a change of meaning is "unchanged" too.
        touch_later(policy_file, "# same\n" + V1.replace("{scopes: []}", "\n    scopes: []"))
        assert reloader.reload() is False
        assert reloader.current() is old
        assert recorder.reports == [("unchanged", old, [])]

    def test_a_loader_bug_is_a_failure_that_keeps_the_old_policy(
        self, policy_file: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        old = reloader.current()

        def explode(paths: object, **_: object) -> PolicySet:
            raise RuntimeError("secret detail")

        # Fault injection: the real loader has no input that makes it crash.
        monkeypatch.setattr(reload_module, "load_policy", explode)
        assert reloader.reload() is False
        assert reloader.current() is old
        (outcome, policy, problems) = recorder.reports[0]
        assert (outcome, policy) == ("failure", None)
        assert problems == [
            "policy: internal error while loading the policy set (RuntimeError); kept the old one"
        ]

    def test_deleting_the_file_is_a_failure_that_keeps_the_old_policy(
        self, policy_file: Path
    ) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        policy_file.unlink()
        assert reloader.changed()
        assert reloader.reload() is False
        assert recorder.reports == [("failure", None, [f"{policy_file}: policy path not found"])]


class TestPolling:
    async def test_polling_reloads_when_a_file_changes(self, policy_file: Path) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        task = asyncio.create_task(reloader.run(0.02))
        try:
            await asyncio.sleep(0.1)
            assert recorder.reports == []  # nothing changed: no reload at all
            touch_later(policy_file, V2)
            await recorder.wait(1)
            assert recorder.outcomes == ["success"]
            assert "notes_add" in reloader.current().exact
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def test_polling_reports_a_broken_file_once_then_recovers(
        self, policy_file: Path
    ) -> None:
        recorder = Recorder()
        reloader = PolicyReloader([policy_file], on_reload=recorder)
        task = asyncio.create_task(reloader.run(0.02))
        try:
            touch_later(policy_file, BROKEN)
            await recorder.wait(1)
            await asyncio.sleep(0.1)  # several more polls: the same broken file is not retried
            assert recorder.outcomes == ["failure"]
            touch_later(policy_file, V2)
            await recorder.wait(2)
            assert recorder.outcomes == ["failure", "success"]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def test_polling_sees_a_new_file_in_a_policy_directory(self, tmp_path: Path) -> None:
        folder = tmp_path / "policies"
        write_text(folder / "10-base.yaml", V1)
        recorder = Recorder()
        reloader = PolicyReloader([folder], on_reload=recorder)
        task = asyncio.create_task(reloader.run(0.02))
        try:
            write_text(folder / "20-notes.yaml", "version: 1\ntools:\n  notes: {scopes: [n]}\n")
            await recorder.wait(1)
            assert recorder.outcomes == ["success"]
            assert sorted(reloader.current().exact) == ["echo", "notes"]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def test_polling_follows_a_configmap_volume_update(self, tmp_path: Path) -> None:
        """The kubelet's atomic writer (a Kubernetes ConfigMap volume): each file is a symlink
        through ``..data``, itself a symlink to a timestamped directory; an update writes a new
        directory and renames a new ``..data`` link over the old one."""
        folder = tmp_path / "policies"
        folder.mkdir()

        def publish(generation: str, text: str) -> None:
            write_text(folder / generation / "default.yaml", text)
            (folder / "..data_tmp").symlink_to(generation)
            (folder / "..data_tmp").rename(folder / "..data")  # atomic swap

        publish("..2026_01_01_00_00_00.1", V1)
        (folder / "default.yaml").symlink_to("..data/default.yaml")
        recorder = Recorder()
        reloader = PolicyReloader([folder], on_reload=recorder)
        assert sorted(reloader.current().exact) == ["echo"]
        task = asyncio.create_task(reloader.run(0.02))
        try:
            publish("..2026_01_01_00_01_00.2", V2)
            await recorder.wait(1)
            assert recorder.outcomes == ["success"]
            assert sorted(reloader.current().exact) == ["echo", "notes_add"]
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def test_a_zero_poll_interval_disables_polling(self, policy_file: Path) -> None:
        reloader = PolicyReloader([policy_file])
        await asyncio.wait_for(reloader.run(0), 1.0)
