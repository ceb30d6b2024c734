"""Config values and keys that used to escape the error formatter (exit 2, a bare exception, or 78 with no
file): each is a ConfigError naming the file, the line and the field, and `autod config check` exits 78."""

from __future__ import annotations

from pathlib import Path

import pytest

from autod.cli import main as cli
from autod.config.settings import ConfigError, load_config
from autod.config.yamlshape import MAX_DEPTH


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "autod.yaml"
    path.write_text(f"workspace: {tmp_path}\n{body}", encoding="utf-8")
    return path


CASES = [
    # (body after the workspace line, line, field, what the message says)
    ('state_dir: "/tmp/st\\0ate"\n', 2, "state_dir", "NUL"),
    ('checks:\n  t:\n    run: "pytest\\0 -x"\n', 4, "checks.t.run", "NUL"),
    ("limits:\n  deny_globs: " + "[" * 5000 + "]" * 5000 + "\n", 3, "limits.deny_globs", "nested deeper"),
    ("limits:\n  max_cycles_per_hour: " + "9" * 5000 + "\n", 3, "limits.max_cycles_per_hour", "of 5000"),
    ("2001-12-14: x\n", 2, "2001-12-14", "a date"),
    ("llm:\n  on: 1\n", 3, "llm.on", "a boolean"),
    ("llm:\n  7: 1\n", 3, "llm.7", "a number"),
]


@pytest.mark.parametrize(("body", "line", "field", "said"), CASES, ids=[c[3] + c[2] for c in CASES])
def test_a_value_or_key_outside_the_schema_names_file_line_and_field(tmp_path, body, line, field, said):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: {field}"), message
    assert said in message and "\n" not in message


def test_a_nul_in_the_workspace_names_its_line(tmp_path):
    path = tmp_path / "autod.yaml"
    path.write_text('workspace: "/tmp/a\\0b"\n')
    with pytest.raises(ConfigError, match=rf"^{path}:1: workspace: holds a NUL"):
        load_config(path)


def test_nesting_up_to_the_limit_is_read_and_past_it_is_refused(tmp_path):
    inside = MAX_DEPTH - 2  # the document and `limits:` hold the first two levels, the brackets the rest
    with pytest.raises(ConfigError, match="should be a valid string"):  # read, still wrong
        load_config(write(tmp_path, "limits:\n  deny_globs: " + "[" * inside + "]" * inside + "\n"))
    deeper = inside + 1
    with pytest.raises(ConfigError, match="nested deeper"):
        load_config(write(tmp_path, "limits:\n  deny_globs: " + "[" * deeper + "]" * deeper + "\n"))


def test_a_nul_set_past_the_yaml_is_refused_by_the_schema(tmp_path):
    # overrides (and JSON in an AUTOD_ variable) never pass through the YAML reader
    path = write(tmp_path, "")
    overrides = [{"state_dir": "/tmp/a\0b"}, {"logging": {"file": "x\0y"}}, {"checks": {"t": {"run": "a\0"}}}]
    for override in overrides:
        with pytest.raises(ConfigError, match="NUL"):
            load_config(path, overrides=override)


def test_an_exception_nothing_foresaw_is_still_a_config_error_naming_the_file(tmp_path):
    # `2001-13-45` resolves as a YAML date that does not exist: PyYAML's constructor raises ValueError
    path = write(tmp_path, "state_dir: 2001-13-45\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: cannot be loaded (ValueError)"), str(info.value)
    assert "month" not in str(info.value)  # the exception's own text is never shown


@pytest.mark.parametrize("body", [c[0] for c in CASES] + ["state_dir: 2001-13-45\n"])
def test_config_check_exits_78_on_each_without_a_traceback(tmp_path, capsys, body):
    code = cli.main(["config", "check", "-c", str(write(tmp_path, body))])
    err = capsys.readouterr().err
    assert code == 78, err
    assert err.startswith(f"autod: {tmp_path}/autod.yaml") and "Traceback" not in err
