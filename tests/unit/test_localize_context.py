"""Localization end to end on a small git repo: what goes in, in which order, within which budget."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from autod.config.settings import load_config
from autod.localize import focus
from autod.localize.context import Localized, localize
from autod.localize.index import build_index
from autod.localize.need import lookup
from autod.safety.boundary import Boundary

LIB = '''\
RATE = 3


def helper(x):
    return x * RATE


def total(items):
    """Sum the helped items."""
    out = 0
    for i in items:
        out += helper(i)
    return out


def unrelated():
    return "never called"
'''
LONG = "def long_one(x):\n" + "".join(f"    x = x + {i}\n" for i in range(300)) + "    return x\n"
TEST = '''\
from lib import total


def _fixture_helper():
    return [1, 2]


def test_total():
    assert total(_fixture_helper()) == 10


def test_other():
    assert True
'''
OUTPUT = """\
=================================== FAILURES ===================================
__________________________________ test_total __________________________________

    def test_total():
>       assert total(_fixture_helper()) == 10
E       assert 9 == 10

tests/test_lib.py:9: AssertionError
FAILED tests/test_lib.py::test_total - assert 9 == 10
FAILED ../outside/test_x.py::test_escape - boom
FAILED .env::test_secret - boom
"""


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "lib.py").write_text(LIB)
    (ws / "big.py").write_text(LONG)
    (ws / "tests" / "test_lib.py").write_text(TEST)
    (ws / ".env").write_text("API_KEY = 'k'\n")
    git(ws, "init", "-q")
    git(ws, "add", "lib.py", "big.py", "tests", ".env")  # a tracked secret: its changes show in git diff
    git(ws, "commit", "-qm", "init")
    return ws


def settings_for(ws: Path, deny: list[str] | None = None, **localize_cfg: object):
    path = ws.parent / "autod.yaml"
    path.write_text(yaml.safe_dump({"workspace": str(ws), "state_dir": str(ws.parent / "state"),
                                    "localize": localize_cfg, "limits": {"deny_globs": deny or []}}))
    s = load_config(path)
    return s, Boundary.for_settings(s)


def run(ws: Path, text: str = OUTPUT, *, green: str | None = None, budget: int = 4000,
        deny: list[str] | None = None, **cfg: object):
    s, b = settings_for(ws, deny, **cfg)
    return asyncio.run(localize(s, b, text=text, locations=[], last_green=green, budget_tokens=budget))


def test_an_assertion_in_the_test_leads_to_the_function_it_calls_and_what_that_reads(repo):
    found = run(repo)
    symbols = [e["symbol"] for e in found.entries]
    # the failing test, what it calls, one hop further, and the constant read there
    assert symbols[:4] == ["test_total", "total", "helper", "RATE"]
    assert "unrelated" not in symbols
    # test files only for the failing test itself: not its helpers, not the other tests
    assert "_fixture_helper" not in symbols and "test_other" not in symbols
    e = found.entries[1]
    assert e["path"] == "lib.py" and e["lines"] == "8-13" and "called" in e["why"]


def test_code_is_shown_without_a_gutter_so_a_search_copied_from_it_matches(repo):
    found = run(repo)
    blocks = re.findall(r"```python\n(.*?)\n```", found.code, re.S)
    assert blocks
    source = LIB + TEST
    for body in blocks:
        assert body in source  # every block is exact file text
    assert "### lib.py · total (lines 8-13;" in found.code


def test_untrusted_test_ids_outside_the_workspace_or_denied_are_dropped(repo):
    found = run(repo)
    assert [t.path for t in found.tests] == ["tests/test_lib.py"]


def test_the_diff_since_green_comes_first_and_is_never_cut(repo):
    green = git(repo, "rev-parse", "HEAD")
    big_change = LIB.replace("RATE = 3", "RATE = 3\n" + "".join(f"# note {i}\n" for i in range(400)))
    (repo / "lib.py").write_text(big_change)
    (repo / ".env").write_text("API_KEY = 'changed'\n")
    found = run(repo, green=green, budget=600)
    assert found.diff.count("+# note") == 400  # far over the budget, still whole
    assert "API_KEY" not in found.diff  # a denied file's changes never reach a prompt
    assert found.entries[0] == {"path": "lib.py", "symbol": None, "lines": "diff",
                                "why": "changed since the last green check"}
    assert found.code  # code still gets its minimum share


def test_without_a_green_revision_the_failing_files_recent_history_is_shown(repo):
    (repo / "lib.py").write_text(LIB.replace("RATE = 3", "RATE = 4"))
    git(repo, "commit", "-qam", "tune the rate")
    found = run(repo)
    assert "tune the rate" in found.diff and "+RATE = 4" in found.diff
    assert "init" not in found.diff  # the root commit (whole files) is not history worth its tokens


def test_the_budget_is_filled_by_rank_and_what_did_not_fit_is_not_recorded(repo):
    small = run(repo, budget=170)
    symbols = [e["symbol"] for e in small.entries if e["lines"] != "outline"]
    assert symbols and symbols == ["test_total", "total", "helper", "RATE"][: len(symbols)]
    assert len(symbols) < 4
    assert len(small.code) // 4 <= 170


def test_a_long_function_is_shown_around_the_line_named(repo):
    text = "Traceback (most recent call last):\n  File \"big.py\", line 250, in long_one\nValueError\n"
    found = run(repo, text=text)
    (entry,) = [e for e in found.entries if e["symbol"] == "long_one"]
    lo, hi = map(int, entry["lines"].split("-"))
    assert lo <= 250 <= hi and hi - lo < 150 and "part of 1-302" in found.code


def test_need_lookup_answers_by_path_or_name_and_never_outside_the_read_rules(repo):
    index = build_index(Boundary(repo, repo.parent / "state", [".env"]))
    assert [d.qualname for d in lookup(index, "lib.py::total")] == ["total"]
    assert [d.path for d in lookup(index, "helper")] == ["lib.py"]
    assert lookup(index, ".env::API_KEY") is None
    assert lookup(index, "../outside.py::x") is None
    assert lookup(index, "/etc/passwd::root") is None
    assert lookup(index, "os.system('x')") is None


REPORT = '''\
class Percent:
    def format_pct(self, x):
        return f"{x * 10:.0f}%"


class Store:
    def get(self, key):
        return "never the dict's get"


def render(fmt, x, options):
    options.get("width")
    return fmt.format_pct(x)
'''
REPORT_TEST = '''\
from report import Percent, render


def _show(x):
    return render(Percent(), x, {})


def test_pct():
    assert _show(0.5) == "50%"
'''
REPORT_OUTPUT = """\
    def test_pct():
>       assert _show(0.5) == "50%"
E       AssertionError: assert '5%' == '50%'

tests/test_report.py:9: AssertionError
FAILED tests/test_report.py::test_pct - AssertionError
"""


def test_a_method_on_a_receiver_of_unknown_type_two_calls_through_a_test_helper_is_found(tmp_path):
    """test -> its helper -> render(fmt, ...) -> fmt.format_pct(): `fmt` has no known type, but there is
    exactly one format_pct in the workspace. A name builtin types have (`options.get`) is not guessed."""
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "report.py").write_text(REPORT)
    (ws / "tests" / "test_report.py").write_text(REPORT_TEST)
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "init")
    found = run(ws, REPORT_OUTPUT)
    symbols = [e["symbol"] for e in found.entries if e["lines"] != "outline"]
    assert "render" in symbols and "Percent.format_pct" in symbols
    assert "Store.get" not in symbols and "_show" not in symbols
    assert 'return f"{x * 10:.0f}%"' in found.code


@pytest.mark.slow
def test_the_focused_view_holds_the_top_definitions_under_test_alone(repo):
    """What focused candidates see: the code under test by rank, whole; no test, no constant, no
    outline (the failure output shows the test; the wide view has the rest). Each suspect carries its
    path, its name and its exact source, for a prompt of its own."""
    def named(found: Localized) -> list[tuple[str, str]]:
        return [(x.path, x.symbol) for x in found.suspects]

    found = run(repo)
    assert named(found) == [("lib.py", "total"), ("lib.py", "helper")]  # all there is (focus_definitions: 3)
    code = "\n".join(x.code for x in found.suspects)
    assert "RATE = 3" not in code and "def test_total" not in code and "def unrelated" not in code
    assert found.suspects[0].code.startswith("def total(") and "```" not in found.suspects[0].code
    assert found.suspects[0].code in (repo / "lib.py").read_text()
    assert run(repo, focus_definitions=2).suspects == found.suspects
    assert named(run(repo, focus_definitions=1)) == [("lib.py", "total")]
    assert run(repo, focus_definitions=0).suspects == []


def test_a_suspect_carries_the_short_values_it_reads_and_no_others(repo):
    """A bug in a value shows in the function that reads it: each suspect carries the constants and
    class attributes it reads (its own module's and an imported one's), short and workspace-only: not
    an alias of a class, not a dunder, not a long table, not a value in a denied file, not what only
    another definition reads, not a type alias it names only in annotations."""
    (repo / "units.py").write_text("INCH = 25\nSECRET_FACTOR = 7\n")
    (repo / "secret_cfg.py").write_text("TOKEN_LEN = 'hunter2'\n")
    table = "TABLE = [\n" + "".join(f"    {i},\n" for i in range(20)) + "]\n"
    (repo / "lib.py").write_text(
        "from units import INCH\nfrom secret_cfg import TOKEN_LEN\n\n"
        "__all__ = ['total']\nRATE = 3\nUNUSED = 9\n" + table + "Alias = dict\n\n\n"
        "class Meter:\n    scale = 100\n    other = 1\n\n"
        "    def reading(self, x):\n        return x * self.scale + INCH\n\n\n"
        "Number = int | float\n\n\n"
        "def total(items: list[Number]) -> Number:\n    t = Alias()\n    m = Meter()\n"
        "    return sum(m.reading(i) for i in items) * RATE + len(TABLE) + len(__all__) + len(TOKEN_LEN)\n"
    )
    found = run(repo, focus_definitions=3, deny=["secret_cfg.py"])
    by = {x.symbol: x for x in found.suspects}
    assert [(v.path, v.symbol, v.code) for v in by["total"].values] == [("lib.py", "RATE", "RATE = 3")]
    assert sorted((v.path, v.symbol, v.code) for v in by["Meter.reading"].values) == [
        ("lib.py", "Meter.scale", "scale = 100"), ("units.py", "INCH", "INCH = 25")]
    rendered = focus.render_values(by["Meter.reading"])
    assert "# Meter.scale\nscale = 100" in rendered and "# INCH in units.py\nINCH = 25" in rendered
    shown = repr(found.suspects)
    assert "hunter2" not in shown and "UNUSED" not in shown and "SECRET_FACTOR" not in shown
    assert "other = 1" not in shown and "Alias" not in shown.replace("Alias()", "")
    assert "Number = " not in shown  # read only in annotations: a type alias, not a value it runs on


def test_the_values_a_suspect_reads_stay_within_their_budget(repo):
    many = "".join(f"V{i} = '{'x' * 200}'\n" for i in range(12))
    (repo / "lib.py").write_text(many + "\n\ndef total(items):\n    return " + " + ".join(
        f"V{i}" for i in range(12)) + "\n")
    found = run(repo)
    (suspect,) = found.suspects
    assert 0 < len(suspect.values) <= focus.MAX_VALUES
    assert sum(len(v.code) for v in suspect.values) <= focus.VALUES_CHARS
    assert {v.symbol for v in suspect.values} <= {f"V{i}" for i in range(12)}


def test_the_operator_on_the_failing_line_ranks_ahead_of_those_the_rest_of_the_test_uses(repo):
    """A test of comparisons uses every operator of the class: the one on the line pytest names
    (`assert v1 >= v3`: __ge__) is the likeliest, and it is a suspect, not the sixth in file order."""
    ops = "".join(f"    def {op}(self, o):\n        return self.n {sym} o.n\n\n" for op, sym in (
        ("__eq__", "=="), ("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"), ("__ge__", ">")))
    (repo / "v.py").write_text(f"class V:\n    def __init__(self, n):\n        self.n = n\n\n{ops}")
    (repo / "tests" / "test_v.py").write_text(
        "from v import V\n\n\ndef test_compare():\n    v1, v3 = V(2), V(2)\n    assert v1 == v3\n"
        "    assert not (v1 < v3)\n    assert v1 <= v3\n    assert not (v1 > v3)\n    assert v1 >= v3\n")
    out = ("    def test_compare():\n>       assert v1 >= v3\nE       assert False\n\n"
           "tests/test_v.py:10: AssertionError\nFAILED tests/test_v.py::test_compare - assert False\n")
    found = run(repo, out)
    operators = [e["symbol"] for e in found.entries if str(e["symbol"]).startswith("V.__") and
                 e["symbol"] != "V.__init__"]
    assert operators[0] == "V.__ge__"
    assert "V.__ge__" in [s.symbol for s in found.suspects]


@pytest.mark.slow
def test_a_definition_the_wide_budget_had_no_room_for_is_still_a_suspect(repo):
    """A suspect's prompt holds the failure and that one definition: the wide prompt's budget, which a
    long failing test or a long function can fill, must not decide which definitions are suspects."""
    padding = "".join(f"    out = out + 0  # step {i}\n" for i in range(60))
    (repo / "lib.py").write_text(LIB.replace("    out = 0\n", "    out = 0\n" + padding))
    wide = run(repo, budget=4000)
    tight = run(repo, budget=300)
    assert "total" in [e["symbol"] for e in wide.entries]
    assert "total" not in [e["symbol"] for e in tight.entries]  # no room in the wide prompt
    assert [s.symbol for s in tight.suspects] == [s.symbol for s in wide.suspects] == ["total", "helper"]
    assert tight.suspects[0].code == wide.suspects[0].code and padding in tight.suspects[0].code


def test_the_values_each_suspect_reads_are_asked_about_together_in_rank_order_each_once():
    """A group per suspect that reads values (at most k groups, in rank order): each value once (in
    the first group that holds it), none in a file a plan may not edit, none without a literal of its
    own (an alias, a logger, a type variable naming itself)."""
    def value(path: str, name: str, code: str = "") -> focus.Value:
        return focus.Value(path, name, code or f"{name.rsplit('.', 1)[-1]} = 1")

    first = focus.Suspect("a.py", "f", "def f(): ...", values=(
        value("a.py", "A1"), value("a.py", "log", "log = logging.getLogger(__name__)"),
        value("a.py", "F", 'F = TypeVar("F", bound=Callable)'), value("a.py", "A2", "A2 = (None, '-')")))
    second = focus.Suspect("b.py", "C.g", "def g(self): ...",
                           values=(value("b.py", "C.flag"), value("a.py", "A1"), value("judge.py", "J")))
    third = focus.Suspect("b.py", "h", "def h(): ...", values=(value("a.py", "A2"),))
    fourth = focus.Suspect("b.py", "k", "def k(): ...", values=(value("b.py", "B", "B = re.compile('x+')"),))
    editable = {"a.py", "b.py"}
    groups = focus.value_suspects([first, second, third, fourth], 10, editable)
    assert [(g.path, g.symbol, g.read_by, [v.symbol for v in g.values]) for g in groups] == [
        ("a.py", "f", "f", ["A1", "A2"]), ("b.py", "C.g", "C.g", ["C.flag"]), ("b.py", "k", "k", ["B"])]
    two = focus.value_suspects([first, second, third, fourth], 2, editable)
    assert [g.symbol for g in two] == ["f", "C.g"]
    assert focus.value_suspects([first, second], 0, editable) == []
    (judged,) = focus.value_suspects([second], 5, {"judge.py", "b.py"})
    assert "J" in [v.symbol for v in judged.values]
    # shown as their files have them: a block per file, the file named above each when several
    assert focus.render_group(groups[0]) == "```python\nA1 = 1\nA2 = (None, '-')\n```"
    mixed = focus.Suspect("b.py", "g", "", values=(value("a.py", "A1"), value("b.py", "C.flag")), read_by="g")
    assert focus.render_group(mixed) == (
        "In `a.py`:\n\n```python\nA1 = 1\n```\n\nIn `b.py`:\n\n```python\nflag = 1\n```")
    assert not focus.has_literal("OMD = MultiDict") and not focus.has_literal('T = NewType("T", int)')
    assert focus.has_literal("WIDTH: int = 8") and focus.has_literal("_in_fstring = False")
