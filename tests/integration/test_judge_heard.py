"""What the recorder heard leaves the test process the moment it is heard: no code that runs later can
take a failure back (autod.checks.heard, autod.checks.judge_plugin `_tell`).

The attacks reach the recorder through pytest's own plugin manager (`pytestPDB._config`, by spellings
the tripwire is silent on) and rewrite what it holds after the failing test reported: the failing
test's phases said passed, its entry dropped, or the whole table swapped, from a later test's code or
from a session-finish hook run before the recorder's, and the session's failure count zeroed so pytest
exits 0. Every combination is generated, and each is first shown to take the failure back when the
recorder has no channel (as on the code before it: `fixed`, or the failing test missing). The
positive control is the real fix.
"""

from __future__ import annotations

import itertools

import pytest
from test_judge_hostile import FAILING, calc_workspace, check, planted
from test_judge_sealed import BUGGY

from autod.checks import heard
from autod.checks.outcome import Before, decide
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

TEST_ID = "tests/test_calc.py::test_add"
HEAD = "import os\n_m = os.sys.modules\n_cfg = _m['_py' + 'test.debugging'].pytestPDB._config\n"
REACH = {  # the recorder's module, from the plugin manager
    "by its name": "    rec = pm.get_plugin('autod_' + 'verdicts')\n",
    "by what it holds": "    rec = [p for p in pm.get_plugins() if hasattr(p, '_st' + 'ate')][0]\n",
}
EDIT = {  # what is rewritten of what it heard
    "said passed": "    for ph in st['phases'].values():\n"
                   "        for k in ph:\n            ph[k] = 'passed'\n",
    "dropped": "    st['phases'].pop('tests/test_calc.py::test_add', None)\n",
    "swapped": "    st['phases'] = {k: {'call': 'passed', 'teardown': 'passed'} for k in st['phases']}\n",
}
WHEN = {
    "a later test's call": (
        "\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    _forge()\n    return a * b\n"),
    "a session-finish hook before the recorder's": '''

class _Plug:
    pass


def _fin(session, exitstatus):
    _forge()


setattr(_Plug, 'py' + 'test_sessionfinish',
        staticmethod(_m['plug' + 'gy'].HookimplMarker('py' + 'test')(tryfirst=True)(_fin)))
getattr(_cfg, 'plugin' + 'manager').register(_Plug())
''' + "\n\n" + BUGGY,
}


def attack(reach: str, edit: str, when: str) -> str:
    forge = ("\n\ndef _forge():\n    pm = getattr(_cfg, 'plugin' + 'manager')\n" + REACH[reach]
             + "    st = getattr(rec, '_st' + 'ate')\n" + EDIT[edit]
             + "    sess = pm.get_plugin('session')\n    sess.testsfailed = 0\n")
    return HEAD + forge + WHEN[when]


CASES = sorted(itertools.product(REACH, EDIT, WHEN))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory):
    return calc_workspace(tmp_path_factory, "heard")


@pytest.mark.parametrize(("reach", "edit", "when"), CASES)
def test_a_failure_heard_is_never_taken_back(workspace, monkeypatch, reach: str, edit: str,
                                             when: str) -> None:
    repo, base = workspace
    with planted(repo, attack(reach, edit, when)):
        with monkeypatch.context() as m:  # the recorder without its channel: the failure is taken back
            m.setattr(heard.Channel, "env", lambda self: {})
            bare = check(repo)
        after = check(repo)
    assert bare.tests is not None and bare.tests.outcomes.get(TEST_ID) in (None, "passed"), bare.output
    if edit != "dropped" and when == "a later test's call":  # pytest's exit status is set by then
        assert decide([bare], Before(1, FAILING, {"tests": base})).status is Status.FIXED
    assert after.tests is not None, after.output[-1500:]
    assert after.tests.outcomes.get(TEST_ID) in ("failed", "error"), (reach, edit, when, after.tests.outcomes)
    for before in ({"tests": base}, {}):
        assert decide([after], Before(1, FAILING, before)).status is Status.ROLLED_BACK, (reach, edit, when)


def test_the_real_fix_is_still_fixed(workspace) -> None:
    repo, base = workspace
    (repo / "src" / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    try:
        after = check(repo)
    finally:
        (repo / "src" / "calc.py").write_text(BUGGY)
    assert after.tests is not None and after.tests.outcomes.get(TEST_ID) == "passed", after.output[-1500:]
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED


def test_the_attacks_are_written_as_the_tripwire_cannot_see_them() -> None:
    assert len(CASES) == len(REACH) * len(EDIT) * len(WHEN) == 12
    for case in CASES:
        assert "return a - b" in attack(*case)
