"""What a fixing candidate may create is an allowance: generated names, never a list of known attacks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autod.act.allowance import new_file_refusal


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "core.py").write_text("x = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "cmd").mkdir()
    (tmp_path / "cmd" / "main.go").write_text("package main\n")
    return tmp_path


def test_every_module_name_python_knows_is_refused_outside_a_package(ws):
    names = sorted(sys.stdlib_module_names | {m.split(".")[0] for m in sys.modules})
    for name in names:
        for where in ("", "src/", "tests/", "cmd/"):
            assert new_file_refusal(f"{where}{name}.py", ws), f"{where}{name}.py"


def test_any_name_inside_an_existing_package_is_allowed_but_the_runners_own(ws):
    for name in sorted(sys.stdlib_module_names)[:200]:
        assert new_file_refusal(f"src/pkg/{name}.py", ws) is None
    for name in ("conftest.py", "__init__.py", "__main__.py", "sitecustomize.py"):
        assert new_file_refusal(f"src/pkg/{name}", ws)


segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-.", min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..")
)


SUFFIXES = ["", ".txt", ".toml", ".ini", ".cfg", ".json", ".yaml", ".pth", ".md", ".py", ".go", ".pyi", ".so"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["", "src/", "src/pkg/", "tests/", "cmd/"]),
       parts=st.lists(segment, min_size=1, max_size=3), suffix=st.sampled_from(SUFFIXES))
def test_a_created_file_is_allowed_only_in_a_package_or_beside_its_own_kind(ws, prefix, parts, suffix):
    rel = prefix + "/".join(parts) + suffix
    why = new_file_refusal(rel, ws)
    inside_package = rel.startswith("src/pkg/") and rel.count("/") == 2
    beside_go = rel.startswith("cmd/") and rel.count("/") == 1 and suffix == ".go"
    if why is None:
        assert (inside_package and suffix == ".py") or beside_go, rel


def test_distribution_metadata_hidden_files_and_configuration_are_refused(ws):
    for rel in ("evil-1.0.dist-info/entry_points.txt", "src/pkg/x.egg-info/PKG-INFO", ".pytest.ini",
                "src/pkg/.hidden.py", "pytest.toml", "setup.cfg", "src/evil.pth", "cmd/config.go",
                "web/app.js"):
        assert new_file_refusal(rel, ws), rel


def test_a_source_file_beside_its_own_kind_is_allowed_and_alone_it_is_not(ws):
    assert new_file_refusal("cmd/helper.go", ws) is None
    assert new_file_refusal("src/pkg/helper.go", ws)  # no .go source beside it
    (ws / "cmd" / "notes.go").mkdir()  # a directory named like source is no sibling
    (ws / "lib").mkdir()
    (ws / "lib" / "notes.go").mkdir()
    assert new_file_refusal("lib/helper.go", ws)


def test_source_directly_inside_distribution_metadata_is_refused_even_beside_its_kind(ws):
    (ws / "lib.data").mkdir()
    (ws / "lib.data" / "main.c").write_text("int main(void) { return 0; }\n")
    assert "distribution metadata" in (new_file_refusal("lib.data/extra.c", ws) or "")


def test_a_symlink_is_no_sibling_that_makes_a_new_source_file_at_home(ws):
    (ws / "native").mkdir()
    (ws / "elsewhere.c").write_text("int x;\n")
    (ws / "native" / "linked.c").symlink_to(ws / "elsewhere.c")
    assert "no .c source is beside it" in (new_file_refusal("native/new.c", ws) or "")
    (ws / "native" / "real.c").write_text("int y;\n")
    assert new_file_refusal("native/new.c", ws) is None
