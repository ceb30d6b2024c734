"""The config contract: unknown keys, file:line:field errors, no echoed secrets, env overrides, cron."""

from __future__ import annotations

from pathlib import Path

import pytest
from shipped import example_config

from autod.config.settings import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "autod.yaml"
    p.write_text(text.replace("WS", str(tmp_path)))
    return p


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as exc:
        load_config(write(tmp_path, text))
    return str(exc.value)


def test_minimal_config_gets_documented_defaults(tmp_path):
    s = load_config(write(tmp_path, "workspace: WS\n"))
    assert s.workspace == tmp_path.resolve()
    assert s.state_path == tmp_path.resolve() / ".autod"
    assert s.log_file == s.state_path / "logs" / "autod.jsonl"
    assert s.modes.enabled() == ["auto-debug", "auto-plan"]
    assert s.llm.base_url is None and s.limits.max_edits_per_cycle == 10


def test_the_example_config_is_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    (tmp_path / "autod.yaml").write_text(example_config())
    s = load_config(tmp_path / "autod.yaml")  # `workspace: .` is this checkout
    assert s.checks["lint-fix"].fixer and s.sources[0].type == "watch"


def test_unknown_nested_key_names_file_line_and_field(tmp_path):
    msg = error(tmp_path, "workspace: WS\nlimits:\n  max_edits_per_cycle: 3\n  max_edit_per_day: 4\n")
    assert msg == f"{tmp_path}/autod.yaml:4: limits.max_edit_per_day: unknown key"


def test_unknown_key_inside_a_source_list_item_is_an_error(tmp_path):
    msg = error(
        tmp_path,
        "workspace: WS\nsources:\n  - {type: watch, paths: [src]}\n  - type: watch\n    pathz: [x]\n",
    )
    assert ":5: sources.1.pathz: unknown key" in msg


def test_yaml_syntax_error_names_the_line(tmp_path):
    msg = error(tmp_path, "workspace: WS\nllm:\n  base_url: [oops\n")
    assert msg.startswith(f"{tmp_path}/autod.yaml:") and "YAML syntax error" in msg


def test_invalid_value_never_echoes_the_input(tmp_path):
    msg = error(
        tmp_path, "workspace: WS\nllm:\n  api_key: sk-live-abcdef123456\n  timeout_s: sk-live-abcdef123456\n"
    )
    assert "llm.timeout_s" in msg and ":4:" in msg
    assert "sk-live-abcdef123456" not in msg


@pytest.mark.parametrize("expr", ["0 7 * * 1-5", "0 7 * * 0", "*/5 * * * 6"])
def test_numeric_weekdays_are_refused_because_apscheduler_counts_0_as_monday(tmp_path, expr):
    msg = error(tmp_path, f'workspace: WS\nmodes:\n  auto-plan: {{enabled: true, schedule: "{expr}"}}\n')
    assert "weekday must use names" in msg and "modes.auto-plan.schedule" in msg


def test_weekday_names_and_check_cron_triggers_are_accepted(tmp_path):
    s = load_config(
        write(
            tmp_path,
            'workspace: WS\nchecks:\n  t: {run: "true", when: ["*/30 * * * *", start]}\n'
            'sources:\n  - {type: cron, schedule: "0 7 * * mon-fri", mode: auto-plan}\n',
        )
    )
    assert s.checks["t"].cron == ["*/30 * * * *"]


def test_env_overrides_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOD_LIMITS__MAX_CYCLES_PER_HOUR", "4")
    monkeypatch.setenv("AUTOD_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    s = load_config(write(tmp_path, "workspace: WS\nlimits: {max_cycles_per_hour: 12}\n"))
    assert s.limits.max_cycles_per_hour == 4 and s.llm.base_url == "http://127.0.0.1:9/v1"


def test_api_key_prefers_the_systemd_credential(tmp_path, monkeypatch):
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "llm_api_key").write_text("from-credential\n")
    s = load_config(write(tmp_path, "workspace: WS\nllm: {api_key: from-yaml}\n"))
    assert s.api_key() == "from-yaml"
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert s.api_key() == "from-credential"
    assert "from-credential" in s.secrets()
    assert "from-yaml" not in repr(s.llm)


def test_missing_file_and_missing_workspace_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    assert "workspace: not a directory" in error(tmp_path, "workspace: /nonexistent/dir\n")
    assert "workspace: required key is missing" in error(tmp_path, "modes: {}\n")


def test_out_of_bounds_value_names_the_field(tmp_path):
    msg = error(tmp_path, "workspace: WS\nlimits:\n  max_edits_per_cycle: 0\n")
    assert ":3: limits.max_edits_per_cycle: Input should be greater than or equal to 1" in msg


def test_llm_reply_form_is_code_by_default_json_when_asked_and_anything_else_names_its_line(tmp_path):
    assert load_config(write(tmp_path, "workspace: WS\n")).llm.reply_form == "code"
    assert load_config(write(tmp_path, "workspace: WS\nllm:\n  reply_form: json\n")).llm.reply_form == "json"
    msg = error(tmp_path, "workspace: WS\nllm:\n  model: m\n  reply_form: yaml\n")
    assert msg.startswith(f"{tmp_path}/autod.yaml:4: llm.reply_form:") and "'code' or 'json'" in msg


def test_a_check_s_outputs_are_workspace_globs_and_a_bad_one_names_its_line(tmp_path):
    ok = "workspace: WS\nchecks:\n  t:\n    run: pytest\n    outputs: [src/_gen/**, '*.so']\n"
    assert load_config(write(tmp_path, ok)).checks["t"].outputs == ["src/_gen/**", "*.so"]
    for bad in ["/etc/**", "../other/*.py", "src/../../x", "a\\\\b"]:
        text = f"workspace: WS\nchecks:\n  t:\n    run: pytest\n    outputs: [ok/*, {bad!r}]\n"
        msg = error(tmp_path, text)
        assert msg.startswith(f"{tmp_path}/autod.yaml:5: checks.t.outputs:"), msg
        assert "glob 2: relative to the workspace" in msg and bad not in msg
