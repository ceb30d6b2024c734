"""Reading autod's per-test recorder back: merged, shaped, capped, and never blocked by what a test left."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autod.checks import pertest
from autod.checks.pertest import load, loads_into


def write(out: Path, pid: int, doc: object) -> None:
    (out / f"results-{pid}.json").write_text(json.dumps(doc))


def doc(tests: dict[str, str], collected: list[str] | None = None, errors: list[str] | None = None) -> dict:
    return {"tests": tests, "collected": collected if collected is not None else sorted(tests),
            "collect_errors": errors or [], "deselected": [], "exitstatus": 0, "complete": True}


def test_no_result_file_is_no_report(tmp_path):
    assert load(tmp_path) is None


def test_every_pytest_process_is_heard_and_the_worst_outcome_wins(tmp_path):
    write(tmp_path, 1, doc({"t::a": "passed", "t::b": "failed"}))
    write(tmp_path, 2, doc({"t::a": "skipped", "t::c": "passed"}, errors=["x.py"]))
    r = load(tmp_path)
    assert r is not None
    assert dict(r.outcomes) == {"t::a": "skipped", "t::b": "failed", "t::c": "passed"}
    assert r.collected == {"t::a", "t::b", "t::c"} and r.collect_errors == ("x.py",)
    assert r.failing == {"t::b"} and r.passed == {"t::c"}


def test_files_not_of_the_recorders_shape_are_ignored(tmp_path):
    (tmp_path / "results-1.json").write_text("not json")
    write(tmp_path, 2, {"tests": {"t::a": "passed"}})  # not complete
    write(tmp_path, 3, [1, 2])
    write(tmp_path, 4, doc({"t::a": "bogus-outcome", "t::b": "passed"}))
    (tmp_path / "evil.json").write_text(json.dumps(doc({"t::z": "passed"})))  # not a recorder's name
    r = load(tmp_path)
    assert r is not None and dict(r.outcomes) == {"t::b": "passed"}


def test_a_fifo_or_symlink_in_place_of_a_result_is_skipped_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "results-1.json")
    secret = tmp_path.parent / "secret.json"
    secret.write_text(json.dumps(doc({"t::s": "passed"})))
    (tmp_path / "results-2.json").symlink_to(secret)
    write(tmp_path, 3, doc({"t::a": "failed"}))
    r = load(tmp_path)  # returns: a blocking open of the FIFO would hang here
    assert r is not None and dict(r.outcomes) == {"t::a": "failed"}


def test_results_over_the_cap_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(pertest, "MAX_RESULTS_BYTES", 200)
    write(tmp_path, 1, doc({f"t::{i}": "passed" for i in range(50)}))
    assert load(tmp_path) is None


@pytest.mark.parametrize(("argv", "loads"), [
    (["python", "-m", "pytest"], True),
    (["python3", "-X", "dev", "-m", "pytest"], True),
    (["python", "-Wdefault::ImportWarning", "-m", "pytest"], True),
    (["python", "-I", "-m", "pytest"], False),
    (["python3.11", "-E", "-m", "pytest"], False),
    (["python", "-bS", "x.py"], False),
    (["python", "-mIPython"], True),
    (["pytest", "-I"], True),
    (["python", "tools/check.py", "-I"], True),
    (["python", "--check-hash-based-pycs", "always", "-I"], True),
    (["python3", "-u"], True),
    (["make", "test"], True),
])
def test_a_python_started_isolated_loads_no_guard(argv, loads):
    assert loads_into(argv) is loads
