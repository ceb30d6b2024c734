"""Branch and patch delivery with real git: the working tree and index are never touched, one branch per
failure, a branch someone changed is never moved, a push is never forced, the cap holds new failures."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autod.act.edits import FileChange
from autod.checks.run import CheckResult
from autod.config.settings import Settings
from autod.cycle.delivery_cap import DeliveryGate
from autod.cycle.limits import Verdict
from autod.delivery.deliver import Delivery, DeliveryHeld
from autod.delivery.ledger import DeliveryLedger
from autod.delivery.rebase import OnHead
from autod.errors import PlanRejected
from autod.events import Event, EventKind
from autod.modes import Verification
from autod.plan import Edit, Plan
from autod.reflection import Reflection

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")


def git(repo: Path, *args: str, check: bool = True) -> str:
    r = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=h", "-c", "user.email=h@example.com", *args],
        capture_output=True,
        text=True,
        check=check,
    )
    return r.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "calc.py").write_text(BUGGY)
    (ws / "README.md").write_text("calc\n")
    (ws / ".gitignore").write_text(".autod/\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(ws)], check=True)
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "init")
    return ws


class ScriptedVerifier:
    """The Verifier seam answered at once; it keeps what it was asked to verify."""

    def __init__(self, status: str = "fixed") -> None:
        self.status = status
        self.seen: list[OnHead] = []

    async def unavailable(self) -> str | None:
        return None

    async def verify(self, mode: Any, event: Any, plan: Any, fix: OnHead, env: Any) -> Verification:
        self.seen.append(fix)
        return Verification(self.status, [CheckResult("tests", 0 if self.status == "fixed" else 1, "", 1234)])


def desk(ws: Path, verifier: ScriptedVerifier | None = None, **delivery: Any) -> Delivery:
    s = Settings(
        workspace=ws,
        modes={"auto-debug": {"enabled": True, "delivery": delivery.pop("kind", "branch")}},
        delivery=delivery,
    )
    s.state_path.mkdir(parents=True, exist_ok=True)
    return Delivery(s, DeliveryLedger(s.state_path / "delivery.db"), verifier or ScriptedVerifier())


def cycle(fp: str = "f" * 16, cid: str = "cyc000000001") -> Any:
    event = Event(
        source="check:tests",
        kind=EventKind.CHECK_FAILED,
        summary="check tests failed: test_add",
        payload={"check": "tests", "excerpt": "E   assert -1 == 5"},
        fingerprint=fp,
    )
    r = Reflection(
        cid, event.id, "auto-debug", fp, "check_failed", event.summary, plan_summary="add must add"
    )
    return SimpleNamespace(
        mode=SimpleNamespace(name="auto-debug"), event=event, r=r, deps=SimpleNamespace(env=None)
    )


PLAN = Plan(summary="add must add", edits=[Edit(path="src/calc.py", search="a - b", replace="a + b")])


def change(ws: Path, rel: str, new: str) -> FileChange:
    path = ws / rel
    old = path.read_bytes() if path.exists() else None
    return FileChange(rel, path, old, new.encode(), 0o644 if old is not None else None, 1, 1)


def snapshot(ws: Path) -> dict[str, Any]:
    files = {
        p.relative_to(ws).as_posix(): p.read_bytes()
        for p in ws.rglob("*")
        if p.is_file() and ".git" not in p.parts and ".autod" not in p.parts
    }
    status = git(ws, "status", "--porcelain=v2")  # first: a status may refresh the index's stat data
    return {
        "files": files,
        "status": status,
        "index": (ws / ".git" / "index").read_bytes(),
        "head": git(ws, "rev-parse", "HEAD"),
        "branch": git(ws, "branch", "--show-current"),
    }


def deliver(d: Delivery, c: Any, changes: list[FileChange]) -> Verification:
    return asyncio.run(d.act(c.mode, c.event, c.r, c.deps.env, PLAN, changes))


@pytest.mark.slow
def test_a_branch_delivery_with_a_dirty_working_tree_leaves_tree_and_index_as_they_were(repo):
    # the operator's uncommitted work: another line of calc.py, and a staged change to README.md
    dirty = BUGGY.replace("def mul(a, b):", "def mul(a, b):  # operator's work in progress")
    (repo / "src" / "calc.py").write_text(dirty)
    (repo / "README.md").write_text("calc, staged\n")
    git(repo, "add", "README.md")
    before = snapshot(repo)
    verifier = ScriptedVerifier()
    d = desk(repo, verifier)
    c = cycle()
    v = deliver(d, c, [change(repo, "src/calc.py", dirty.replace("a - b", "a + b"))])

    assert v.status == "fixed"
    assert snapshot(repo) == before  # files, index, HEAD, status, checked-out branch: all as they were
    branch = c.r.delivery["branch"]
    assert branch == "autod/auto-debug/check-tests-failed-test-add-ffffffffff"
    assert c.r.delivery["outcome"] == "delivered" and c.r.delivery["reapplied"] == ["src/calc.py"]
    assert git(repo, "show", f"{branch}:src/calc.py") + "\n" == FIXED  # HEAD's version + the fix only
    assert git(repo, "rev-parse", f"{branch}^") == before["head"]
    assert c.r.commit == git(repo, "rev-parse", branch)
    message = git(repo, "log", "-1", "--format=%B", branch)
    for part in (
        "autod(auto-debug): rewrites add() in src/calc.py",  # read from the diff, not the plan's words
        "The planner's summary (its own words, not checked against the diff):\n    add must add",
        "What failed: check tests failed: test_add",
        "src/calc.py | +1 -1",
        "How it was verified:",
        "tests: exit 0 in 1.2s",
        "Outcome: fixed",
        f"Autod-Cycle: {c.r.cycle_id}",
        "uncommitted changes in src/calc.py",
    ):
        assert part in message, part
    # verified is HEAD with the fix: README.md (staged, uncommitted) is shown to the checks as in HEAD
    fix = verifier.seen[0]
    assert fix.files["src/calc.py"].data.decode() == FIXED
    assert fix.head_view["README.md"].data == b"calc\n"


def test_an_edit_overlapping_uncommitted_changes_is_refused_naming_the_file(repo):
    (repo / "src" / "calc.py").write_text(BUGGY.replace("return a - b", "return a - b  # why?"))
    d = desk(repo)
    with pytest.raises(PlanRejected) as err:
        deliver(
            d, cycle(), [change(repo, "src/calc.py", BUGGY.replace("return a - b", "return a + b  # why?"))]
        )
    assert "src/calc.py (autod's edit overlaps your uncommitted changes there)" in err.value.reason
    assert git(repo, "branch", "--list", "autod/*") == ""


def test_a_file_not_in_head_is_refused(repo):
    (repo / "src" / "new.py").write_text("X = 1\n")
    with pytest.raises(PlanRejected) as err:
        deliver(desk(repo), cycle(), [change(repo, "src/new.py", "X = 2\n")])
    assert "src/new.py (not in HEAD" in err.value.reason


@pytest.mark.slow
def test_one_branch_per_failure_is_updated_from_the_new_head_never_one_per_cycle(repo):
    d = desk(repo)
    first = cycle(cid="cyc000000001")
    deliver(d, first, [change(repo, "src/calc.py", FIXED)])
    (repo / "README.md").write_text("calc v2\n")  # the operator moves HEAD on
    git(repo, "commit", "-qam", "readme")
    second = cycle(cid="cyc000000002")
    deliver(d, second, [change(repo, "src/calc.py", FIXED)])
    assert second.r.delivery["branch"] == first.r.delivery["branch"]
    assert git(repo, "branch", "--list", "autod/*").count("autod/") == 1
    branch = second.r.delivery["branch"]
    assert git(repo, "rev-parse", f"{branch}^") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "show", f"{branch}:README.md") == "calc v2"


@pytest.mark.slow
def test_a_branch_someone_changed_is_never_moved_and_the_fix_goes_to_a_patch(repo):
    d = desk(repo)
    c1 = cycle(cid="cyc000000001")
    deliver(d, c1, [change(repo, "src/calc.py", FIXED)])
    branch = c1.r.delivery["branch"]
    git(repo, "checkout", "-q", branch)
    (repo / "NOTES").write_text("mine\n")
    git(repo, "add", "NOTES")
    git(repo, "commit", "-qm", "a human's commit on autod's branch")
    git(repo, "checkout", "-q", "main")
    human_tip = git(repo, "rev-parse", branch)
    c2 = cycle(cid="cyc000000002")
    v = deliver(d, c2, [change(repo, "src/calc.py", FIXED)])
    assert v.status == "fixed"
    assert git(repo, "rev-parse", branch) == human_tip  # never overwritten
    assert c2.r.delivery["outcome"] == "patch_instead"
    assert f"branch {branch} was changed by someone else" in c2.r.delivery["problem"]
    patch = Path(c2.r.delivery["patch"])
    assert patch.parent == d.outbox and patch.read_text().startswith("From ")
    status = asyncio.run(d.status())
    assert any("was changed by someone else" in p["problem"] for p in status["problems"])


@pytest.mark.slow
def test_a_branch_name_that_exists_and_is_not_autods_is_never_touched(repo):
    name = "autod/auto-debug/check-tests-failed-test-add-ffffffffff"
    git(repo, "branch", name)
    tip = git(repo, "rev-parse", name)
    c = cycle()
    deliver(desk(repo), c, [change(repo, "src/calc.py", FIXED)])
    assert git(repo, "rev-parse", name) == tip
    assert c.r.delivery["outcome"] == "patch_instead" and "was not made by autod" in c.r.delivery["problem"]


def bare_remote(repo: Path, tmp_path: Path, hook: str | None = None) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    if hook:
        (remote / "hooks" / "pre-receive").write_text(f"#!/bin/sh\necho '{hook}' >&2\nexit 1\n")
        (remote / "hooks" / "pre-receive").chmod(0o755)
    git(repo, "remote", "add", "origin", str(remote))
    return remote


@pytest.mark.slow
def test_a_branch_is_pushed_and_a_remote_branch_someone_changed_is_refused_not_forced(repo, tmp_path):
    remote = bare_remote(repo, tmp_path)
    d = desk(repo, push="origin")
    c1 = cycle(cid="cyc000000001")
    deliver(d, c1, [change(repo, "src/calc.py", FIXED)])
    branch = c1.r.delivery["branch"]
    assert c1.r.delivery["push"] == {"remote": "origin", "ok": True}
    assert git(remote, "rev-parse", f"refs/heads/{branch}") == c1.r.commit
    # someone pushes on top of autod's branch
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", branch, str(remote), str(clone)], check=True)
    (clone / "NOTES").write_text("review\n")
    git(clone, "add", "NOTES")
    git(clone, "commit", "-qm", "review fix")
    git(clone, "push", "-q", "origin", branch)
    theirs = git(remote, "rev-parse", f"refs/heads/{branch}")
    (repo / "README.md").write_text("calc v2\n")
    git(repo, "commit", "-qam", "move HEAD")
    c2 = cycle(cid="cyc000000002")
    deliver(d, c2, [change(repo, "src/calc.py", FIXED)])
    assert git(remote, "rev-parse", f"refs/heads/{branch}") == theirs  # never forced over
    assert c2.r.delivery["push"]["ok"] is False and "refused" in c2.r.delivery["problem"]
    assert c2.r.delivery["outcome"] == "delivered"  # the local branch has the fix
    assert "never forces" in asyncio.run(d.status())["problems"][0]["problem"]


@pytest.mark.slow
def test_a_remote_that_rejects_the_push_is_a_clear_problem(repo, tmp_path):
    bare_remote(repo, tmp_path, hook="branch pushes are closed")
    d = desk(repo, push="origin")
    c = cycle()
    v = deliver(d, c, [change(repo, "src/calc.py", FIXED)])
    assert v.status == "fixed" and c.r.delivery["push"]["ok"] is False
    assert "pre-receive hook declined" in c.r.delivery["problem"]
    assert git(repo, "rev-parse", c.r.delivery["branch"]) == c.r.commit


def test_a_patch_delivery_is_a_format_patch_that_git_applies_to_head(repo, tmp_path):
    d = desk(repo, kind="patch")
    c = cycle()
    deliver(d, c, [change(repo, "src/calc.py", FIXED)])
    patch = Path(c.r.delivery["patch"])
    assert patch.parent == repo / ".autod" / "outbox" and patch.name.endswith(".patch")
    text = patch.read_text()
    assert text.startswith(f"From {c.r.commit} ")
    assert "Subject: [PATCH] autod(auto-debug): rewrites add() in src/calc.py" in text
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "am", "-q", str(patch))
    assert (clone / "src" / "calc.py").read_text() == FIXED
    assert git(repo, "branch", "--list", "autod/*") == ""  # no branch, no ref: only the file


@pytest.mark.slow
def test_the_cap_holds_a_new_failure_until_a_branch_is_merged_or_deleted(repo):
    d = desk(repo, max_open=1)

    class Open:
        def admit(self, event: Event, *, uses_llm: bool, now: float | None = None) -> Verdict:
            return Verdict(True)

    gate = DeliveryGate(Open(), d)
    first = cycle(fp="a" * 16)
    deliver(d, first, [change(repo, "src/calc.py", FIXED)])
    other = cycle(fp="b" * 16)
    held = gate.admit(other.event, uses_llm=True)
    assert not held.ok and held.reason.startswith("delivery cap reached: 1/1 open autod branches and patches")
    same = gate.admit(first.event, uses_llm=True)  # its fix waits on a branch made from this HEAD
    assert same.drop and same.reason.startswith(f"its fix is already in branch {first.r.delivery['branch']}")
    (repo / "README.md").write_text("calc v2\n")
    git(repo, "commit", "-qam", "HEAD moves on")
    assert gate.admit(first.event, uses_llm=True).ok  # planned again: its branch is updated, no new slot
    with pytest.raises(DeliveryHeld):  # an approval, which skips the gate, is held the same way
        deliver(d, other, [change(repo, "src/calc.py", FIXED)])
    assert [h["fingerprint"] for h in asyncio.run(d.status())["held"]] == ["b" * 16]
    git(repo, "branch", "-D", first.r.delivery["branch"])
    assert gate.admit(other.event, uses_llm=True).ok


@pytest.mark.slow
def test_undo_of_a_branch_delivery_is_a_revert_commit_and_is_refused_after_a_human_change(repo):
    d = desk(repo)
    c = cycle()
    deliver(d, c, [change(repo, "src/calc.py", FIXED)])
    branch = c.r.delivery["branch"]
    out = d.undo(c.r.cycle_id, "undo00000001", "wrong fix")
    assert out["ok"] and out["kind"] == "branch"
    assert git(repo, "show", f"{branch}:src/calc.py") + "\n" == BUGGY
    assert git(repo, "rev-parse", f"{branch}^") == c.r.commit
    assert "This reverts commit" in git(repo, "log", "-1", "--format=%B", branch)
    assert d.undo(c.r.cycle_id, "undo00000002", "again")["error"].endswith("already undone (by undo00000001)")
    c2 = cycle(cid="cyc000000002")
    deliver(d, c2, [change(repo, "src/calc.py", FIXED)])
    git(repo, "checkout", "-q", branch)
    (repo / "NOTES").write_text("mine\n")
    git(repo, "add", "NOTES")
    git(repo, "commit", "-qm", "human")
    git(repo, "checkout", "-q", "main")
    refused = d.undo(c2.r.cycle_id, "undo00000003", "x")
    assert not refused["ok"] and "changed by someone else" in refused["error"]


@pytest.mark.slow
def test_undo_of_a_patch_delivery_withdraws_the_file_unless_someone_edited_it(repo):
    d = desk(repo, kind="patch")
    c = cycle()
    deliver(d, c, [change(repo, "src/calc.py", FIXED)])
    patch = Path(c.r.delivery["patch"])
    patch.write_text(patch.read_text() + "\n# reviewed\n")
    assert "changed since autod wrote it" in d.undo(c.r.cycle_id, "u1", "x")["error"]
    assert patch.exists()
    c2 = cycle(fp="c" * 16, cid="cyc000000002")
    deliver(d, c2, [change(repo, "src/calc.py", FIXED)])
    assert d.undo(c2.r.cycle_id, "u2", "x")["ok"] and not Path(c2.r.delivery["patch"]).exists()


@pytest.mark.slow
def test_a_planted_receivepack_or_ext_url_runs_nothing_when_autod_pushes(repo, tmp_path):
    remote = bare_remote(repo, tmp_path)
    mark = tmp_path / "receivepack-ran"
    git(repo, "config", "remote.origin.receivepack", f"touch {mark}; git-receive-pack")
    c = cycle()
    deliver(desk(repo, push="origin"), c, [change(repo, "src/calc.py", FIXED)])
    assert c.r.delivery["push"]["ok"] is True and not mark.exists()
    assert git(remote, "rev-parse", f"refs/heads/{c.r.delivery['branch']}") == c.r.commit
    ext_mark = tmp_path / "ext-ran"
    git(repo, "remote", "add", "evil", f"ext::sh -c touch% {ext_mark}")
    c2 = cycle(fp="e" * 16, cid="cyc000000002")
    deliver(desk(repo, push="evil"), c2, [change(repo, "src/calc.py", FIXED)])
    assert c2.r.delivery["push"]["ok"] is False and not ext_mark.exists()


@pytest.mark.slow
def test_autods_branch_checked_out_in_a_worktree_is_not_moved_under_it(repo, tmp_path):
    d = desk(repo)
    c1 = cycle(cid="cyc000000001")
    deliver(d, c1, [change(repo, "src/calc.py", FIXED)])
    branch = c1.r.delivery["branch"]
    git(repo, "worktree", "add", "-q", str(tmp_path / "review"), branch)  # someone tries the fix out
    (repo / "README.md").write_text("calc v2\n")
    git(repo, "commit", "-qam", "HEAD moves on")
    c2 = cycle(cid="cyc000000002")
    deliver(d, c2, [change(repo, "src/calc.py", FIXED)])
    assert git(repo, "rev-parse", branch) == c1.r.commit
    assert c2.r.delivery["outcome"] == "patch_instead" and "is checked out" in c2.r.delivery["problem"]
    assert "is checked out" in d.undo(c1.r.cycle_id, "u1", "x")["error"]


def test_config_check_refuses_a_push_remote_the_repository_lacks_and_a_bad_delivery_value(repo, capsys):
    from autod.cli import main as cli

    cfg = repo.parent / "autod.yaml"
    cfg.write_text(
        f"workspace: {repo}\nmodes:\n  auto-debug:\n    enabled: true\n    delivery: branch\n"
        "delivery:\n  push: upstream\n"
    )
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    assert f"{cfg}:7: delivery.push: the repository has no remote named 'upstream'" in capsys.readouterr().err
    cfg.write_text(f"workspace: {repo}\nmodes:\n  auto-debug:\n    enabled: true\n    delivery: pr\n")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    assert f"{cfg}:5: modes.auto-debug.delivery:" in capsys.readouterr().err


def test_config_check_refuses_branch_delivery_outside_a_git_repository(tmp_path, capsys):
    from autod.cli import main as cli

    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nmodes:\n  auto-debug: {{enabled: true, delivery: patch}}\n")
    assert cli.main(["config", "check", "-c", str(cfg)]) == 78
    err = capsys.readouterr().err
    assert f"{cfg}:3: modes.auto-debug.delivery: patch delivery needs a git repository with a commit" in err
