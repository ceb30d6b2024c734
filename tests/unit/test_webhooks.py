"""Webhook notifications: the durable outbox and the courier, against a real loopback receiver."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from webhookreceiver import Receiver

from autod.config.settings import ConfigError, Settings, load_config
from autod.webhooks import payload
from autod.webhooks.courier import Courier
from autod.webhooks.outbox import Outbox

TOKEN = "tok-9f8e7d6c5b4a3210"


def settings_for(tmp_path: Path, hooks: list[dict[str, Any]], **notify: Any) -> Settings:
    return Settings(
        workspace=tmp_path, notify={"webhooks": hooks, "retry_base_s": 0.05, "retry_max_s": 0.2, **notify}
    )


def note(key: str, event: str = "fixed") -> payload.Notification:
    return payload.Notification(
        key,
        event,
        f"[auto-debug] {event}: check tests failed",
        "files: src/calc.py",
        {"cycle": {"cycle_id": key}},
    )


async def carry(courier: Courier, until: Any, timeout: float = 15.0) -> None:
    """Run the courier until `until()` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(trust_env=False) as client:
        while not until():
            if loop.time() > deadline:
                raise AssertionError("timed out")
            await courier.one_pass(client)
            await asyncio.sleep(0.02)


@pytest.mark.slow
def test_a_receiver_that_is_down_gets_every_notification_once_in_order_when_it_is_back(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    rx = Receiver()
    s = settings_for(tmp_path, [{"name": "ops", "url": rx.url, "token_env": "HOOK_TOKEN"}])
    outbox = Outbox(tmp_path / "webhooks.db", 100)
    courier = Courier(lambda: s, outbox)

    async def go() -> list[dict[str, Any]]:
        for i in range(3):
            assert await courier.announce(note(f"c{i}:fixed")) == 1
        async with httpx.AsyncClient(trust_env=False) as client:
            for _ in range(3):  # down: each pass fails and backs off, nothing is lost
                await courier.one_pass(client)
                await asyncio.sleep(0.06)
        assert courier.hooks["ops"].down_since is not None
        rx.start()
        try:
            await carry(courier, lambda: len(rx.accepted()) == 3)
            await courier.announce(note("c1:fixed"))  # announced again after delivery: not resent
            async with httpx.AsyncClient(trust_env=False) as client:
                await courier.one_pass(client)
            return await courier.status()
        finally:
            rx.stop()

    with structlog.testing.capture_logs() as logs:
        status = asyncio.run(go())
    docs = rx.documents()
    assert [d["id"] for d in docs] == ["c0:fixed", "c1:fixed", "c2:fixed"]
    assert [r["headers"]["Idempotency-Key"] for r in rx.accepted()] == ["c0:fixed", "c1:fixed", "c2:fixed"]
    assert all(r["headers"]["Authorization"] == f"Bearer {TOKEN}" for r in rx.accepted())
    assert status[0]["state"] == "ok" and status[0]["queued"] == 0 and status[0]["sent"] == 3
    events = [e["event"] for e in logs]
    assert events.count("webhook.unreachable") == 1 and "webhook.recovered" in events
    shown = json.dumps(logs, default=str)
    assert TOKEN not in shown and str(rx.port) not in shown  # neither the token nor the URL is logged


@pytest.mark.slow
def test_the_outbox_survives_a_restart_and_is_bounded_dropping_the_oldest_with_a_log_line(tmp_path):
    rx = Receiver().start()
    try:
        s = settings_for(tmp_path, [{"name": "ops", "url": rx.url}], outbox_max_items=10)
        first = Outbox(tmp_path / "webhooks.db", 10)
        courier = Courier(lambda: s, first)
        with structlog.testing.capture_logs() as logs:
            for i in range(12):
                asyncio.run(courier.announce(note(f"k{i:02d}:fixed")))
        first.close()
        dropped = [e for e in logs if e["event"] == "webhook.outbox_dropped"]
        assert [e["key"] for e in dropped] == ["k00:fixed", "k01:fixed"]
        again = Outbox(tmp_path / "webhooks.db", 10)  # a new daemon: what was kept is still there
        courier = Courier(lambda: s, again)
        asyncio.run(carry(courier, lambda: len(rx.accepted()) == 10))
        assert [d["id"] for d in rx.documents()] == [f"k{i:02d}:fixed" for i in range(2, 12)]
        assert again.figures()["ops"] == {"queued": 0, "sent": 10, "dropped": 2}
    finally:
        rx.stop()


@pytest.mark.slow
def test_a_receiver_answering_5xx_keeps_the_notification_until_it_takes_it(tmp_path):
    rx = Receiver().start()
    rx.fail_with = 503
    s = settings_for(tmp_path, [{"name": "ops", "url": rx.url}])
    courier = Courier(lambda: s, Outbox(tmp_path / "webhooks.db", 100))

    async def go() -> None:
        await courier.announce(note("c9:fixed"))
        await carry(courier, lambda: len(rx.requests) >= 2)
        rx.fail_with = None
        await carry(courier, lambda: len(rx.accepted()) == 1)

    try:
        asyncio.run(go())
    finally:
        rx.stop()
    assert [r["status"] for r in rx.requests][-1] == 200
    assert all(json.loads(r["body"])["id"] == "c9:fixed" for r in rx.requests)


@pytest.mark.slow
def test_slack_format_and_a_url_from_a_systemd_credential(tmp_path, monkeypatch):
    creds = tmp_path / "creds"
    creds.mkdir()
    rx = Receiver().start()
    (creds / "slack_url").write_text(rx.url + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    s = settings_for(
        tmp_path,
        [{"name": "chat", "url_credential": "slack_url", "format": "slack", "events": ["quarantined"]}],
    )
    courier = Courier(lambda: s, Outbox(tmp_path / "webhooks.db", 100))

    async def go() -> None:
        assert await courier.announce(note("c1:fixed")) == 0  # not an event this webhook takes
        n = payload.Notification("q1", "quarantined", "[auto-debug] quarantined: <b>x</b> & y")
        assert await courier.announce(n) == 1
        await carry(courier, lambda: len(rx.accepted()) == 1)

    try:
        asyncio.run(go())
    finally:
        rx.stop()
    body = json.loads(rx.accepted()[0]["body"])
    assert set(body) == {"text"} and "&lt;b&gt;x&lt;/b&gt; &amp; y" in body["text"]
    assert rx.url in s.secrets()  # a URL from a credential is redacted wherever it would appear


def test_a_finished_cycle_makes_its_notifications():
    record = {
        "cycle_id": "abc",
        "mode": "auto-debug",
        "status": "rolled_back",
        "reason": "checks still fail",
        "summary": "check tests failed",
        "quarantined": True,
        "fingerprint": "f1",
        "edits": [],
        "checks": [],
    }
    got = payload.from_cycle(record)
    assert [(n.event, n.key) for n in got] == [
        ("rolled_back", "abc:rolled_back"),
        ("quarantined", "quarantine:f1:abc"),
    ]
    stopped = {
        **record,
        "status": "failed",
        "reason": "stopped: the daemon is shutting down",
        "quarantined": False,
    }
    assert payload.from_cycle(stopped) == []


@pytest.mark.parametrize(
    ("hook", "field"),
    [
        ({"name": "ops"}, "notify.webhooks.0"),
        ({"name": "ops", "url": "ftp://x"}, "notify.webhooks.0.url"),
        ({"name": "ops", "url": "http://x", "events": ["fixd"]}, "notify.webhooks.0.events.0"),
        ({"name": "ops", "url": "http://x", "format": "xml"}, "notify.webhooks.0.format"),
        ({"name": "ops", "url": "http://x", "token": "inline"}, "notify.webhooks.0.token"),
    ],
)
def test_bad_webhook_config_names_file_line_and_field(tmp_path, hook, field):
    import yaml

    cfg = tmp_path / "autod.yaml"
    cfg.write_text(
        yaml.safe_dump({"workspace": str(tmp_path), "notify": {"webhooks": [hook]}}, sort_keys=False)
    )
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value).startswith(f"{cfg}:") and f": {field}:" in str(err.value)


@pytest.mark.slow
def test_a_wedge_and_a_spent_budget_are_announced_once_each(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from autod.webhooks import announce

    monkeypatch.setattr(announce, "WATCH_S", 0.01)
    s = settings_for(tmp_path, [{"name": "ops", "url": "http://127.0.0.1:9/hook"}])
    courier = Courier(lambda: s, Outbox(tmp_path / "webhooks.db", 100))
    wedge = {
        "slot": "dispatch",
        "what": "cycle 7a1078b8e828",
        "cycle_id": "7a1078b8e828",
        "running_s": 900.0,
        "deadline_s": 840.0,
    }
    looks = []

    def wedged() -> dict[str, Any]:
        looks.append(1)
        return wedge

    spent = "max_tokens_per_day spent (2000001/2000000); waiting for the next UTC day"
    dispatcher = SimpleNamespace(progress=SimpleNamespace(wedged=wedged), waiting_reason=spent)

    async def go() -> None:
        task = asyncio.create_task(announce.watch_daemon(courier, dispatcher))
        try:
            while len(looks) < 10:  # ten looks at a daemon that stays wedged with its budget spent
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    item = courier.outbox.head("ops")
    assert item is not None and item.event == "wedged" and item.key.startswith("wedged:7a1078b8e828:")
    assert courier.outbox.figures()["ops"]["queued"] == 2  # one wedge, one budget
