"""Ranking rules that hold on libraries nobody tuned on: the values a suspect reads follow it, a class's
own class-level statements are suspects with its methods, a helper the most suspicious function calls
follows it, and among equals the shorter comes first; each bounded."""

from __future__ import annotations

from pathlib import Path

from autod.localize.index import build_index
from autod.localize.rank import HELPERS_PER_CALLER, VALUES_PER_READER, Site, rank
from autod.localize.spectrum import Spectrum
from autod.safety.boundary import Boundary

LIB = '''\
PATTERN = r"[a-z]+"


def parse(text):
    return helper(text) + len(PATTERN)


def helper(text):
    return text.strip()


def other(text):
    return text
'''


def ranked(tmp_path: Path, files: dict[str, str], **kw: object) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    tests = kw.pop("tests", [])
    named = [(index.get(path, qual), None) for path, qual in tests]  # type: ignore[misc]
    pieces = rank(index, changed={}, sites=kw.pop("sites", []), tests=named, **kw)  # type: ignore[arg-type]
    return [str(p.symbol) for p in pieces]


def test_a_value_the_raising_function_reads_comes_right_after_it(tmp_path):
    spectrum = {("lib.py", "other"): 1.0, ("lib.py", "helper"): 0.9}
    got = ranked(tmp_path, {"lib.py": LIB}, sites=[Site("lib.py", 5, 0)], spectrum=spectrum)
    assert got[:2] == ["parse", "PATTERN"]  # not behind every function the failing tests ran


def lines_run(path: str, scores: dict[tuple[str, str], float], **lines: tuple[int, int]) -> Spectrum:
    """Function scores, and (failed, passed) counts of the lines named `L<n>` (one failing test)."""
    return Spectrum(dict(scores), {path: {int(k[1:]): v for k, v in lines.items()}}, total_failed=1)


def test_a_helper_the_most_suspicious_function_calls_follows_it_though_passing_tests_run_it_too(tmp_path):
    scores = {("lib.py", "parse"): 1.0, ("lib.py", "other"): 0.7, ("lib.py", "helper"): 0.2}
    # parse's call of helper (line 5) runs in the failing test alone; helper runs in 24 passing tests too
    spectrum = lines_run("lib.py", scores, L5=(1, 0), L9=(1, 24))
    got = ranked(tmp_path, {"lib.py": LIB}, spectrum=spectrum)
    assert got.index("helper") < got.index("other")
    assert got.index("parse") < got.index("helper")  # never ahead of its caller
    # without line-level evidence nothing says the failing tests reached it through `parse`
    assert ranked(tmp_path, {"lib.py": LIB}, spectrum=scores)[-1] == "helper"


def test_a_helper_called_from_a_line_every_test_runs_keeps_its_place(tmp_path):
    scores = {("lib.py", "parse"): 1.0, ("lib.py", "other"): 0.7, ("lib.py", "helper"): 0.2}
    spectrum = lines_run("lib.py", scores, L5=(1, 24), L9=(1, 24))
    got = ranked(tmp_path, {"lib.py": LIB}, spectrum=spectrum)
    assert got.index("other") < got.index("helper")


def test_a_helper_of_a_function_ranked_by_its_frame_is_left_to_the_evidence(tmp_path):
    scores = {("lib.py", "other"): 0.7, ("lib.py", "helper"): 0.2}
    spectrum = lines_run("lib.py", scores, L5=(1, 0), L9=(1, 24))
    got = ranked(tmp_path, {"lib.py": LIB}, sites=[Site("lib.py", 5, 0)], spectrum=spectrum)
    assert got.index("other") < got.index("helper")


def test_a_caller_promotes_a_bounded_number_of_helpers(tmp_path):
    helpers = "".join(f"def h{i}(x):\n    return x\n\n\n" for i in range(6))
    src = helpers + "def top(x):\n    return " + " + ".join(f"h{i}(x)" for i in range(6)) + "\n\n\n"
    src += "def middle(x):\n    return x\n"
    scores = {("m.py", "top"): 1.0, ("m.py", "middle"): 0.6, **{("m.py", f"h{i}"): 0.1 for i in range(6)}}
    got = ranked(tmp_path, {"m.py": src}, spectrum=lines_run("m.py", scores, L26=(1, 0)))
    assert got.index("middle") == 1 + HELPERS_PER_CALLER


def test_a_class_level_default_of_the_class_whose_method_failed_is_a_suspect(tmp_path):
    src = '''\
class Base:
    DEFAULT = "%Y"

    def __init__(self, fmt=None):
        self.fmt = fmt or self.DEFAULT


class Child(Base):
    DEFAULT = "%Y-%m"
    LIMIT = 3

    def __call__(self, v):
        return v.strftime(self.fmt)


def unrelated(v):
    return v
'''
    spectrum = {("m.py", "Child.__call__"): 0.8, ("m.py", "unrelated"): 0.7, ("m.py", "Base.__init__"): 0.3}
    got = ranked(tmp_path, {"m.py": src}, spectrum=spectrum)
    assert got[:3] == ["Child.__call__", "Child.DEFAULT", "Child.LIMIT"]


def test_a_library_constant_a_failing_tests_table_is_built_from_is_a_suspect(tmp_path):
    lib = 'DATE = "%Y-%m-%d"\nTIME = "%H:%M"\n\n\ndef fmt(v, f):\n    return v.strftime(f)\n'
    test = '''\
import pytest
from lib import DATE, TIME, fmt

CASES = [(1, DATE + "T" + TIME)]


@pytest.mark.parametrize("v,f", CASES)
def test_fmt(v, f):
    assert fmt(v, f)
'''
    files = {"lib.py": lib, "tests/test_lib.py": test}
    got = ranked(tmp_path, files, tests=[("tests/test_lib.py", "test_fmt")])
    assert "TIME" in got and got.index("TIME") < got.index("fmt")


def test_a_reader_pulls_a_bounded_number_of_values(tmp_path):
    consts = "".join(f"C{i} = {i}\n" for i in range(10))
    src = consts + "\n\ndef f():\n    return " + " + ".join(f"C{i}" for i in range(10)) + "\n\n\n"
    src += "def g():\n    return 0\n"
    got = ranked(tmp_path, {"m.py": src}, spectrum={("m.py", "f"): 1.0, ("m.py", "g"): 0.9})
    assert got[0] == "f" and all(x.startswith("C") for x in got[1 : 1 + VALUES_PER_READER])
    assert got[1 + VALUES_PER_READER] == "g"  # the rest keep their place by the evidence alone


def test_among_equally_suspicious_functions_the_shorter_comes_first(tmp_path):
    src = "def long_one(x):\n" + "    x += 1\n" * 30 + "    return x\n\n\ndef short(x):\n    return x\n"
    got = ranked(tmp_path, {"m.py": src}, spectrum={("m.py", "long_one"): 0.5, ("m.py", "short"): 0.5})
    assert got == ["short", "long_one"]


def test_a_utility_the_failing_tests_also_reach_another_way_keeps_its_place(tmp_path):
    src = "def util(x):\n    return x\n\n\ndef top(x):\n    return util(x)\n\n\n"
    src += "def elsewhere(x):\n    return util(x)\n\n\n"
    src += "".join(f"def f{i}(x):\n    return x\n\n\n" for i in range(5))
    scores = {("m.py", "top"): 1.0, **{("m.py", f"f{i}"): 0.9 - i / 10 for i in range(5)},
              ("m.py", "elsewhere"): 0.2, ("m.py", "util"): 0.1}
    got = ranked(tmp_path, {"m.py": src}, spectrum=lines_run("m.py", scores, L6=(1, 0)))
    assert got.index("util") > got.index("elsewhere")  # not pulled behind `top`
    del scores[("m.py", "elsewhere")]  # only passing tests take the other way: `top` is its way in
    got = ranked(tmp_path, {"m.py": src}, spectrum=lines_run("m.py", scores, L6=(1, 0)))
    assert got.index("util") == got.index("top") + 1


def test_the_values_moved_behind_their_readers_are_bounded_in_lines(tmp_path):
    from autod.localize.rank import VALUES_TOTAL_LINES

    consts = "".join(f"T{i} = [\n" + "    1,\n" * 8 + "]\n" for i in range(18))  # 10 lines each
    funcs = "".join(f"\n\ndef f{k}():\n    return " + " + ".join(f"T{6 * k + i}" for i in range(6)) + "\n"
                    for k in range(3))
    (tmp_path / "m.py").write_text(consts + funcs)
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    spectrum = {("m.py", "f0"): 1.0, ("m.py", "f1"): 0.9, ("m.py", "f2"): 0.8}
    pieces = rank(index, changed={}, sites=[], tests=[], spectrum=spectrum)
    f2 = next(p.key for p in pieces if p.symbol == "f2")
    moved = [p for p in pieces if p.kind == "constant" and p.key < f2]
    assert moved and sum(p.end - p.start + 1 for p in moved) <= VALUES_TOTAL_LINES


def test_the_focused_view_takes_its_suspects_in_the_evidences_order(tmp_path):
    """One suspect a prompt: a helper moved behind its caller for the wide prompt's sake, or a short
    function put first among equals to fit its budget, does not push out a more suspicious one."""
    from autod.localize import focus

    scores = {("lib.py", "parse"): 1.0, ("lib.py", "other"): 0.7, ("lib.py", "helper"): 0.2}
    (tmp_path / "lib.py").write_text(LIB)
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    pieces = rank(index, changed={}, sites=[], tests=[],
                  spectrum=lines_run("lib.py", scores, L5=(1, 0), L9=(1, 24)))
    assert [p.symbol for p in pieces if p.kind == "function"] == ["parse", "helper", "other"]  # wide
    lines = LIB.splitlines()
    assert [s.symbol for s in focus.suspects(pieces, lambda _: lines, 2)] == ["parse", "other"]
