"""When `autod run` writes its demo project: an empty directory and no config anywhere, nothing else."""

from __future__ import annotations

from autod.cli import demo


def test_the_demo_is_wanted_only_in_an_empty_directory_with_no_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the search paths (./autod.yaml, ./config/autod.yaml) are relative
    for name in ("AUTOD_CONFIG", "AUTOD_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    if demo.find_config(None) is not None:  # /etc/autod/autod.yaml installed here: found, as it should be
        assert not demo.wanted(None, empty)
        return
    assert demo.wanted(None, empty)
    assert not demo.wanted(str(tmp_path / "given.yaml"), empty)  # -c names one
    monkeypatch.setenv("AUTOD_WORKSPACE", str(empty))
    assert not demo.wanted(None, empty)
    monkeypatch.delenv("AUTOD_WORKSPACE")
    (empty / ".keep").write_text("")  # not even a dotfile: the directory is someone's
    assert not demo.wanted(None, empty)


def test_the_demo_config_is_valid_and_its_module_has_what_lint_fails_on(tmp_path):
    from autod.config.settings import load_config

    (tmp_path / "autod.yaml").write_text(demo.FILES["autod.yaml"][0])
    s = load_config(tmp_path / "autod.yaml")
    assert [n for n, c in s.checks.items() if not c.fixer] == ["tests", "lint"]
    assert s.checks["lint-fix"].fixer and s.llm.base_url is None and s.sources[0].type == "watch"
    assert "import os\n" in demo.FILES["inventory.py"][0]  # what `lint` fails on and `lint-fix` removes
