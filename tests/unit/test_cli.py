"""The CLI: every command the README documents parses, config check messages, progress only on a TTY."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path

import pytest

from autod.cli import main as cli
from autod.cli.view import Progress

README = Path(__file__).resolve().parents[2] / "README.md"

# Values for the placeholders the README's synopsis uses; a new placeholder must be added here.
POSITIONAL = {
    "MODE": "auto-debug",
    "ID": "abc123",
    "QUERY": "operator rejected",
    "FP": "f65ff563",
    "EVENT": "3f9a0c2e",
    "CYCLE": "7a1078b8e828",
}
OPTION_VALUES = {
    "-c": "CONFIG",
    "--cycle": "abc123def456",
    "--max-minutes": "2.5",
    "--phase": "reflect",
    "--level": "warning",
    "--mode": "auto-doc",
    "--reason": "not like this",
    "--path": "src/calc.py",
    "--message": "please look",
    "-n": "7",
    "-k": "3",
}


def readme_synopses() -> list[str]:
    """The `autod ...` lines of the code block in README's "Operating it" section, descriptions cut."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Operating it", 1)[1]
    block = section.split("```", 2)[1]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.startswith("autod ")]


def readme_invocations() -> list[tuple[list[str], list[str]]]:
    """(argv, the values in it) per synopsis alternative, with every option it shows filled in."""
    out: list[tuple[list[str], list[str]]] = []
    for synopsis in readme_synopses():
        alternatives = [a.strip() for a in synopsis.removeprefix("autod ").split(" | ")]
        prefix: list[str] = []
        for i, alt in enumerate(alternatives):
            tokens = alt.replace("[", " ").replace("]", " ").split()
            words = []
            while tokens and re.fullmatch(r"[a-z][a-z-]*", tokens[0]):
                words.append(tokens.pop(0))
            if i == 0:
                prefix = words[:-1]  # "memory stats | search ...": the alternatives are memory's
            else:
                words = prefix + words
            argv, values = list(words), []
            while tokens:
                tok = tokens.pop(0)
                if tok.startswith("-"):
                    argv.append(tok)
                    if tokens and not tokens[0].startswith("-"):
                        values.append(OPTION_VALUES.get(tok, tokens.pop(0)))
                        argv.append(values[-1])
                else:
                    assert tok in POSITIONAL, (
                        f"README placeholder {tok!r} in {synopsis!r}: add it to POSITIONAL"
                    )
                    values.append(POSITIONAL[tok])
                    argv.append(values[-1])
            out.append((argv, values))
    return out


FLAGS = {"--json": "json", "--once": "once", "-f": "follow", "--dry-run": "dry_run", "--all": "all"}


def command_words(argv: list[str], values: list[str]) -> str:
    words = []
    for a in argv:
        if a.startswith("-") or a in values:
            break
        words.append(a)
    return " ".join(words)


def test_the_readme_cli_table_is_found_and_covers_every_command():
    first_words = {command_words(argv, values) for argv, values in readme_invocations()}
    assert first_words == {
        "run",
        "config check",
        "status",
        "logs",
        "history",
        "show",
        "proposals",
        "approve",
        "reject",
        "pause",
        "resume",
        "trigger",
        "retry",
        "quarantine",
        "quarantine clear",
        "memory stats",
        "memory search",
        "memory prune",
        "undo",
        "metrics",
    }, first_words


@pytest.mark.parametrize(
    ("argv", "values"), [pytest.param(a, v, id=" ".join(a)) for a, v in readme_invocations()]
)
def test_every_readme_invocation_parses_with_its_values_and_flags(argv, values):
    args = cli.build_parser().parse_args(argv)
    assert callable(args.fn)
    parsed = vars(args)
    assert set(values) <= {str(v) for v in parsed.values()}, (values, parsed)
    for flag, dest in FLAGS.items():
        if flag in argv:
            assert parsed[dest] is True, (flag, parsed)


def test_a_misspelt_command_or_option_exits_2_with_usage(capsys):
    for argv in (["statsu"], ["logs", "--phase", "think"], ["trigger", "auto-everything"]):
        with pytest.raises(SystemExit) as exc:
            cli.build_parser().parse_args(argv)
        assert exc.value.code == 2
        assert "usage: autod" in capsys.readouterr().err


# -- config check ------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_config_check_ok_names_the_file_workspace_modes_checks_and_planner(tmp_path, capsys):
    cfg = write(
        tmp_path / "autod.yaml",
        f"workspace: {tmp_path}\n"
        "checks:\n  tests: {run: python -m pytest -q}\n"
        "llm: {base_url: 'http://127.0.0.1:9/v1'}\n",
    )
    assert cli.main(["config", "check", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{cfg}: ok (workspace {tmp_path}, modes auto-debug, auto-plan, checks tests,")
    assert out.splitlines()[0].endswith("planner llm)")
    assert out.splitlines()[1].startswith("sandbox: ")


def test_config_check_says_rules_planner_and_no_checks_for_a_bare_config(tmp_path, capsys):
    cfg = write(tmp_path / "autod.yaml", f"workspace: {tmp_path}\nllm: {{base_url: null}}\n")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 0
    assert "checks none, planner rules)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("llm:\n  timeot_s: 3\n", ":3: llm.timeot_s: unknown key"),
        ("llm:\n  api_key: sk-verysecretvalue123\n  timeout_s: soon\n", ":4: llm.timeout_s"),
        ("limits:\n  proposal_ttl_h: 0\n", ":3: limits.proposal_ttl_h"),
        ("modes:\n  auto-debug: {enabled: maybe}\n", "modes.auto-debug.enabled"),
        ("checks:\n  tests: [oops\n", "YAML syntax error"),
    ],
    ids=["unknown-key", "bad-type", "out-of-bound", "bad-bool", "yaml-syntax"],
)
def test_config_check_exits_78_with_one_line_naming_file_line_and_field(tmp_path, capsys, body, expected):
    cfg = write(tmp_path / "autod.yaml", f"workspace: {tmp_path}\n{body}")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"autod: {cfg}") and expected in line, line
    assert "sk-verysecretvalue123" not in line and "Traceback" not in line


def test_config_check_names_a_missing_file_and_a_missing_workspace(tmp_path, capsys):
    assert cli.main(["config", "check", "-c", str(tmp_path / "nope.yaml")]) == 78
    assert f"{tmp_path / 'nope.yaml'}: config file not found" in capsys.readouterr().err
    cfg = write(tmp_path / "autod.yaml", f"workspace: {tmp_path / 'gone'}\n")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    assert "workspace: not a directory" in capsys.readouterr().err


# -- commands that need the daemon, without one --------------------------------------------------


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    return write(tmp_path / "autod.yaml", f"workspace: {tmp_path}\nstate_dir: {tmp_path / 'state'}\n")


def test_approve_without_a_daemon_exits_3_and_says_how_to_start_it(config, capsys):
    assert cli.main(["approve", "abc", "-c", str(config)]) == 3
    assert "the daemon is not running; `approve` needs it" in capsys.readouterr().err


def test_status_without_a_daemon_or_state_says_so_and_names_what_it_looked_at(config, capsys):
    assert cli.main(["status", "-c", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "autod is not running"  # no state dir yet: nothing else to say but the sandbox
    # ... and which config and state dir it looked at
    assert [line for line in out[1:] if not line.startswith("  sandbox: ")] == [
        f"  config: {config}   state dir: {config.parent / 'state'}"
    ]
    assert cli.main(["status", "--json", "-c", str(config)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config_file"] == str(config) and data["state_dir"] == str(config.parent / "state")


def test_pause_and_trigger_without_a_daemon_are_kept_for_its_next_start(config, capsys):
    from autod.stores.queue import EventQueue
    from autod.stores.state import State

    assert cli.main(["pause", "-c", str(config)]) == 0
    assert cli.main(["trigger", "auto-debug", "--message", "look at this", "-c", str(config)]) == 0
    assert "it starts paused" in capsys.readouterr().out
    assert cli.main(["status", "-c", str(config)]) == 0
    down = capsys.readouterr().out
    assert down.startswith("autod is not running (figures read from the state dir)")
    assert "paused: it starts paused" in down and "queue depth: 1" in down
    state_dir = config.parent / "state"
    state, queue = State(state_dir / "state.db"), EventQueue(state_dir / "queue.db")
    try:
        assert state.get_kv("paused") is True and queue.depth() == 1
    finally:
        state.close()
        queue.close()


# -- progress ----------------------------------------------------------------------------------


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.slow
def test_progress_is_silent_when_stderr_is_not_a_terminal(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with Progress("applying and verifying"):
        time.sleep(0.5)  # past the spinner's first frame (0.2 s) had it been drawing
    assert err.getvalue() == ""


@pytest.mark.slow
def test_progress_spins_on_a_terminal_and_clears_its_line(monkeypatch):
    err = FakeTTY()
    monkeypatch.setattr(sys, "stderr", err)
    with Progress("applying and verifying"):
        deadline = time.monotonic() + 10  # hang guard only
        while "applying and verifying" not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    text = err.getvalue()
    assert text.startswith("\r| applying and verifying (")
    assert text.endswith(" \r")  # the spinner's line is blanked when the operation ends
