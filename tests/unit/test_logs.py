"""Structured logging: redaction, cycle context, file rotation, renderers, library noise."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import stat
from datetime import datetime
from pathlib import Path

import pytest
import structlog

from autod import logs

SECRET = "sk-live-Zq7hunter2SECRETvalue"


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    yield
    logs.configure_logging(file=None, stderr=False)  # closes the handlers a test installed
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    logs.set_secrets([])
    structlog.contextvars.clear_contextvars()


@pytest.fixture
def logfile(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "autod.jsonl"


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fail_with_secret_in_a_local() -> None:
    api_credential = SECRET  # a local holding the key: rendered locals would leak it
    raise RuntimeError(f"upstream refused key {api_credential}")


def test_configured_secret_never_reaches_file_or_stderr(logfile: Path, capsys) -> None:
    logs.configure_logging(level="debug", file=logfile, secrets=[SECRET])
    log = logs.get_logger("autod.test")
    log.info(f"calling with {SECRET}", header=f"x-key {SECRET}", nested={"a": [1, {"b": f"<{SECRET}>"}]})
    log.warning("tuple and object", values=(SECRET,), obj=ValueError(SECRET))
    try:
        _fail_with_secret_in_a_local()
    except RuntimeError:
        log.exception("call failed")
    logging.getLogger("httpx").warning("library says %s", SECRET)
    logs.flush()

    written = logfile.read_text(encoding="utf-8")
    err = capsys.readouterr().err
    assert SECRET not in written
    assert SECRET not in err
    records = lines_of(logfile)
    assert [r["event"] for r in records] == ["calling with ***", "tuple and object", "call failed",
                                            "library says ***"]
    assert records[0]["nested"] == {"a": [1, {"b": "<***>"}]}
    exc = records[2]["exception"][-1]
    assert exc["exc_type"] == "RuntimeError" and exc["exc_value"] == "upstream refused key ***"
    assert all("locals" not in frame for frame in exc["frames"])
    assert "Traceback" in err and "upstream refused key ***" in err


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("Authorization: Bearer abc.DEF-123_xyz", "abc.DEF-123_xyz"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNz'", "dXNlcjpwYXNz"),
        ("sent token Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi.payload.sig"),
        ("key sk-proj_abcdefgh12345 rejected", "sk-proj_abcdefgh12345"),
        ("GET /v1?api_key=abc123xyz&x=1", "abc123xyz"),
        ('{"api_key": "abc123xyz", "model": "m"}', "abc123xyz"),
        ("db login password=hunter22 ok", "hunter22"),
    ],
)
def test_credential_patterns_are_redacted_without_configured_secrets(text: str, leaked: str) -> None:
    out = logs.redact(None, "info", {"event": text, "nested": [text]})
    assert leaked not in out["event"] and leaked not in out["nested"][0]
    assert "***" in out["event"]


def test_secret_named_keys_are_redacted_but_token_counts_are_kept() -> None:
    event = {
        "event": "llm call",
        "api_key": "plain-looking",
        "Authorization": "Basic Zm9v",
        "headers": {"X-Api-Key": "abc", "accept": "json"},
        "access_token": "t0k3n",
        "password": "",
        "tokens": {"prompt": 120, "completion": 45},
        "max_tokens": 512,
    }
    out = logs.redact(None, "info", event)
    assert out["api_key"] == out["Authorization"] == out["access_token"] == "***"
    assert out["headers"] == {"X-Api-Key": "***", "accept": "json"}
    assert out["password"] == ""  # nothing to hide, and "***" would suggest there was
    assert out["tokens"] == {"prompt": 120, "completion": 45}
    assert out["max_tokens"] == 512


def test_redaction_leaves_the_callers_objects_untouched() -> None:
    logs.set_secrets([SECRET])
    payload = {"cfg": {"key": SECRET}, "items": [SECRET]}
    logs.redact(None, "info", {"event": "x", "payload": payload})
    assert payload == {"cfg": {"key": SECRET}, "items": [SECRET]}


def test_set_secrets_replaces_the_list(logfile: Path) -> None:
    logs.configure_logging(file=logfile, secrets=["first-secret-value"], stderr=False)
    logs.set_secrets(["second-secret-value"])
    logs.get_logger().info("values", a="first-secret-value", b="second-secret-value")
    (record,) = lines_of(logfile)
    assert record["a"] == "first-secret-value"
    assert record["b"] == "***"


def test_every_line_of_a_cycle_carries_its_context(logfile: Path) -> None:
    logs.configure_logging(file=logfile, stderr=False)
    log = logs.get_logger("autod.cycle.phases")
    log.info("before")
    logs.bind_cycle("c0ffee00" * 4, "e" * 32, "auto-debug")
    for phase in logs.PHASES:
        logs.set_phase(phase)
        log.info("in phase", n=1)
        logging.getLogger("apscheduler").warning("library line inside the cycle")
    logs.clear_cycle()
    log.info("after")

    records = lines_of(logfile)
    inside = records[1:-1]
    assert len(inside) == 8
    assert [r["phase"] for r in inside] == [p for p in logs.PHASES for _ in range(2)]
    for record in inside:
        assert (record["cycle_id"], record["event_id"], record["mode"]) == ("c0ffee00" * 4, "e" * 32,
                                                                           "auto-debug")
    for outside in (records[0], records[-1]):
        assert not {"cycle_id", "event_id", "mode", "phase"} & outside.keys()


def test_concurrent_tasks_keep_their_own_cycle_context(logfile: Path) -> None:
    logs.configure_logging(file=logfile, stderr=False)
    log = logs.get_logger("autod.cycle.phases")

    async def cycle(cycle_id: str, gate: asyncio.Event, other: asyncio.Event) -> None:
        logs.bind_cycle(cycle_id, "ev-" + cycle_id, "auto-doc")
        logs.set_phase("act")
        gate.set()
        await other.wait()  # both contexts are bound before either logs
        log.info("acting", who=cycle_id)

    async def main() -> None:
        a, b = asyncio.Event(), asyncio.Event()
        await asyncio.gather(cycle("aaa", a, b), cycle("bbb", b, a))

    asyncio.run(main())
    records = lines_of(logfile)
    assert sorted((r["who"], r["cycle_id"], r["event_id"]) for r in records) == [
        ("aaa", "aaa", "ev-aaa"),
        ("bbb", "bbb", "ev-bbb"),
    ]


def test_set_phase_rejects_unknown_phase() -> None:
    with pytest.raises(ValueError, match="phase"):
        logs.set_phase("verify")


def test_file_lines_are_json_with_utc_timestamp_level_and_event(logfile: Path) -> None:
    logs.configure_logging(file=logfile, stderr=False)
    logs.get_logger().warning("multi\nline ünïcode", path=Path("/x/y"), when=datetime(2024, 1, 2))
    raw = logfile.read_text(encoding="utf-8")
    assert raw.count("\n") == 1 and "ünïcode" in raw  # one line, utf-8 rather than \u escapes
    (record,) = lines_of(logfile)
    assert record["level"] == "warning"
    assert record["event"] == "multi\nline ünïcode"
    assert record["path"] == "/x/y"
    stamp = datetime.fromisoformat(record["timestamp"])
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0


def test_log_dir_is_private_and_created(tmp_path: Path) -> None:
    target = tmp_path / "state" / "logs" / "autod.jsonl"
    logs.configure_logging(file=target, stderr=False)
    logs.get_logger().info("hello")
    assert target.is_file()
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert not stat.S_IMODE(target.stat().st_mode) & 0o007  # not world-readable


def test_file_is_reopened_after_logrotate_moves_it(logfile: Path) -> None:
    logs.configure_logging(file=logfile, stderr=False)
    log = logs.get_logger()
    log.info("before rotation")
    rotated = logfile.with_name("autod.jsonl.1")
    os.rename(logfile, rotated)
    log.info("after rotation")
    logs.flush()
    assert [r["event"] for r in lines_of(rotated)] == ["before rotation"]
    assert [r["event"] for r in lines_of(logfile)] == ["after rotation"]


def test_reconfigure_replaces_handlers_and_closes_the_old_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "autod.jsonl", tmp_path / "b" / "autod.jsonl"
    root = logging.getLogger()
    before = list(root.handlers)  # pytest's own handlers are there too
    logs.configure_logging(file=first, stderr=True)
    old_file_handlers = [h for h in root.handlers if isinstance(h, logging.FileHandler) and h not in before]
    assert len(old_file_handlers) == 1
    logs.configure_logging(file=second, stderr=True, secrets=["reload-secret"])
    logs.get_logger().info("after reload", v="reload-secret")

    assert len(root.handlers) == len(before) + 2  # one file, one stderr: nothing duplicated
    assert all(h.stream is None for h in old_file_handlers)  # closed
    assert not first.exists() or first.read_text() == ""
    (record,) = lines_of(second)
    assert record["v"] == "***"


def test_level_applies_to_autod_loggers_only(logfile: Path) -> None:
    logs.configure_logging(level="debug", file=logfile, stderr=False)
    logs.get_logger("cycle").debug("autod debug")
    logs.get_logger(__name__).debug("module outside the package, still ours")
    logging.getLogger("httpx").info("HTTP Request: POST http://127.0.0.1/v1/chat \"200 OK\"")
    logging.getLogger("apscheduler.scheduler").info("Added job")
    logging.getLogger("chromadb.telemetry.product.posthog").error("Failed to send telemetry event")
    logging.getLogger("httpx").warning("retrying")
    records = lines_of(logfile)
    assert [(r["event"], r["logger"]) for r in records] == [
        ("autod debug", "autod.cycle"),
        ("module outside the package, still ours", f"autod.{__name__}"),
        ("retrying", "httpx"),
    ]

    logs.configure_logging(level="info", file=logfile, stderr=False)
    logs.get_logger("cycle").debug("hidden at info")
    assert len(lines_of(logfile)) == 3


def test_unknown_level_is_refused(logfile: Path) -> None:
    with pytest.raises(ValueError, match=r"logging\.level"):
        logs.configure_logging(level="verbose", file=logfile)


def test_stderr_is_plain_under_journald_even_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = FakeTTY()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")
    monkeypatch.delenv("NO_COLOR", raising=False)
    logs.configure_logging(file=None, stderr=True)
    logs.get_logger().warning("disk nearly full", free_mb=12)
    text = tty.getvalue()
    assert "disk nearly full" in text and "free_mb=12" in text
    assert "\x1b[" not in text
    assert not re.match(r"\d{4}-\d\d-\d\d", text)  # journald stamps each line itself


def test_stderr_is_coloured_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = FakeTTY()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    logs.configure_logging(file=None, stderr=True)
    logs.get_logger().warning("disk nearly full")
    assert "\x1b[" in tty.getvalue()


def test_stderr_is_plain_when_not_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    logs.configure_logging(file=None, stderr=True)
    logs.get_logger().error("failed", code=2)
    assert "failed" in pipe.getvalue() and "\x1b[" not in pipe.getvalue()


def test_flush_syncs_the_file(logfile: Path) -> None:
    logs.configure_logging(file=logfile, stderr=False)
    logs.get_logger().info("last words")
    logs.flush()
    assert lines_of(logfile)[-1]["event"] == "last words"


def test_under_journald_every_line_carries_its_syslog_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    err = FakeTTY()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")
    logs.configure_logging(level="debug", file=None, stderr=True)
    log = logs.get_logger("cycle")
    log.debug("detail")
    log.info("cycle.finished")
    log.warning("memory.degraded", why="server unreachable")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("dispatch.crashed")
    logging.getLogger("chromadb").critical("library gave up")
    lines = err.getvalue().splitlines()
    words = ("detail", "cycle.", "memory.", "gave")
    firsts = {line[:3]: line for line in lines if any(w in line for w in words)}
    assert "detail" in firsts["<7>"]
    assert "cycle.finished" in firsts["<6>"] and "memory.degraded" in firsts["<4>"]
    assert "library gave up" in firsts["<2>"]
    traceback = [line for line in lines if "RuntimeError" in line or "Traceback" in line]
    assert traceback and all(line.startswith("<3>") for line in traceback)  # each traceback line, too
    assert all(re.match(r"<[2-7]>", line) for line in lines)


def test_a_stderr_that_is_not_the_journal_stream_gets_no_priority_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with (tmp_path / "stderr.txt").open("w+") as redirected:
        monkeypatch.setattr("sys.stderr", redirected)
        monkeypatch.setenv("JOURNAL_STREAM", "8:12345")  # inherited, but stderr went to a file
        logs.configure_logging(file=None, stderr=True)
        logs.get_logger().error("failed")
        logs.flush()
        redirected.seek(0)
        text = redirected.read()
    assert "failed" in text and not text.startswith("<")


def test_survive_turns_a_swallowed_error_into_a_warning_and_lets_cancellation_through():
    import structlog.testing

    with structlog.testing.capture_logs() as captured:
        with logs.survive("area.thing_failed", part="x"):
            raise OSError("disk full")
        logs.bind_cycle("c-42", "e-1", "auto-debug")
        try:
            with logs.survive("area.other_failed"):
                raise ValueError("bad")
        finally:
            logs.clear_cycle()
    first, second = captured
    assert (first["event"], first["log_level"], first["part"]) == ("area.thing_failed", "warning", "x")
    assert first["error"] == "OSError: disk full" and "cycle_id" not in first
    assert second["event"] == "area.other_failed" and second["cycle_id"] == "c-42"
    with pytest.raises(asyncio.CancelledError), logs.survive("area.never"):
        raise asyncio.CancelledError
