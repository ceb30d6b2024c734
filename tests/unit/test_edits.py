"""prepare(): confinement, deny globs, search/replace, size, scope and caps; unified_diff()."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autod.act import Boundary, Caps, FileChange, prepare, unified_diff
from autod.act.edits import glob_match
from autod.errors import PlanRejected
from autod.plan import Edit, Plan

DENY = ["**/.env", ".env.*", "**/*.pem", "**/secrets/**", "**/.ssh/**"]
CAPS = Caps(max_edits=10, max_lines=200, max_file_bytes=10_000)


def plan(*edits: tuple[str, str, str]) -> Plan:
    return Plan(summary="test", edits=[Edit(path=p, search=s, replace=r) for p, s, r in edits])


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under root (symlinks not followed) with its bytes, link target or 'dir'."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link->" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "sub" / ".git").mkdir(parents=True)
    (ws / "sub" / ".git" / "HEAD").write_text("ref: x\n")
    (ws / ".env").write_text("KEY=1\n")
    (ws / "config" / "secrets").mkdir(parents=True)
    (ws / "config" / "secrets" / "x").write_text("s\n")
    (ws / "key.pem").write_text("pem\n")
    (ws / ".autod").mkdir()
    (ws / ".autod" / "state.db").write_text("db\n")
    outside.mkdir()
    (outside / "victim.txt").write_text("do not touch\n")
    (ws / "out_dir").symlink_to(outside)
    (ws / "link_file.py").symlink_to(outside / "victim.txt")
    (ws / "inner_link.py").symlink_to(ws / "src" / "calc.py")
    return {"ws": ws, "outside": outside, "root": tmp_path}


def boundary(tree: dict[str, Path]) -> Boundary:
    return Boundary(tree["ws"], tree["ws"] / ".autod", DENY)


# Each rule's own words, never text the path already holds: `("../x", "..")` passed with the '..' rule
# deleted, because the reason of whichever rule refused the path next repeats the path.
@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../x", "'..' is not allowed in paths"),
        ("a/../../x", "'..' is not allowed in paths"),
        ("src/../src/calc.py", "'..' is not allowed in paths"),
        ("/etc/passwd", "absolute or home-relative path is outside the workspace"),
        ("~/.bashrc", "absolute or home-relative path is outside the workspace"),
        ("src\\calc.py", "backslashes are not allowed in paths"),
        ("..\\x", "backslashes are not allowed in paths"),
        ("out_dir/victim.txt", "symlinks are never followed or edited"),
        ("out_dir/new.txt", "symlinks are never followed or edited"),
        ("link_file.py", "symlinks are never followed or edited"),
        ("inner_link.py", "symlinks are never followed or edited"),
        (".git/config", ".git is never edited or read"),
        ("sub/.git/HEAD", ".git is never edited or read"),
        (".GIT/config", ".git is never edited or read"),
        (".env", "(limits.deny_globs)"),
        ("src/.env", "(limits.deny_globs)"),
        (".env.local", "(limits.deny_globs)"),
        ("config/secrets/x", "(limits.deny_globs)"),
        ("config/secrets/new.txt", "(limits.deny_globs)"),
        ("key.pem", "(limits.deny_globs)"),
        ("deep/dir/KEY.PEM", "(limits.deny_globs)"),
        (".autod/state.db", "inside autod's state dir"),
        (".autod/new", "inside autod's state dir"),
        ("src/calc.py.autod-tmp-1", "autod temp files are never edited"),
        ("src/calc.py\x00.txt", "path contains a NUL byte"),
        ("src/ca\nlc.py", "path contains control characters"),
        ("src/calc.py/x", "a parent is not a directory"),
        ("src", "not a regular file"),
        ("./", "path names the workspace itself"),
    ],
)
def test_unsafe_path_is_rejected_and_nothing_is_written(tree: dict[str, Path], path: str, rule: str) -> None:
    assert rule.lower() not in path.lower()  # the rule's own words, not the input's
    before = snapshot(tree["root"])
    # A valid edit first: a rejected plan must not be partly applied either.
    p = plan(("src/calc.py", "a - b", "a + b"), (path, "", "owned\n"))
    with pytest.raises(PlanRejected) as exc:
        prepare(p, boundary(tree), CAPS)
    assert rule in exc.value.reason
    assert snapshot(tree["root"]) == before


def test_rejection_reason_names_path_but_never_contents(tree: dict[str, Path]) -> None:
    with pytest.raises(PlanRejected) as exc:
        prepare(plan(("src/calc.py", "SECRET-TOKEN-123", "x")), boundary(tree), CAPS)
    assert "src/calc.py" in exc.value.reason
    assert "SECRET-TOKEN-123" not in exc.value.reason


def test_workspace_reached_through_a_symlink_is_fine(tree: dict[str, Path]) -> None:
    alias = tree["root"] / "alias"
    alias.symlink_to(tree["ws"])
    conf = Boundary(alias, alias / ".autod", DENY)
    [change] = prepare(plan(("src/calc.py", "a - b", "a + b")), conf, CAPS)
    assert change.path == tree["ws"].resolve() / "src" / "calc.py"
    with pytest.raises(PlanRejected, match="state dir"):
        prepare(plan((".autod/x", "", "y")), conf, CAPS)


def test_state_dir_outside_workspace_leaves_dot_autod_editable(tree: dict[str, Path]) -> None:
    conf = Boundary(tree["ws"], tree["root"] / "state", DENY)
    [change] = prepare(plan((".autod/notes.md", "", "hi\n")), conf, CAPS)
    assert change.rel == ".autod/notes.md"


def test_path_is_normalised(tree: dict[str, Path]) -> None:
    rel, path = boundary(tree).resolve("./src//calc.py")
    assert rel == "src/calc.py"
    assert path == tree["ws"].resolve() / "src" / "calc.py"


@pytest.mark.parametrize(
    ("pattern", "rel", "hit"),
    [
        (".env", "a/b/.env", True),
        ("*.pem", "a/key.pem", True),
        ("**/secrets/**", "secrets/x", True),
        ("**/secrets/**", "a/secrets/b/c", True),
        ("**/secrets/**", "a/secretsx/b", False),
        ("build/*", "build/out/x.o", True),
        ("build/*", "src/build/x", False),
        ("docs/*.md", "docs/a.md", True),
        ("docs/*.md", "docs/sub/a.md", False),
        ("**/*.key", "monkey.py", False),
        ("[!a]bc", "xbc", True),
        ("[!a]bc", "abc", False),
    ],
)
def test_deny_glob_semantics(pattern: str, rel: str, hit: bool) -> None:
    assert glob_match(pattern, rel) is hit


def test_search_not_found_is_rejected(tree: dict[str, Path]) -> None:
    with pytest.raises(PlanRejected, match=r"search text not found in src/calc\.py"):
        prepare(plan(("src/calc.py", "a * b", "a + b")), boundary(tree), CAPS)


def test_search_found_twice_is_rejected_naming_the_first_two_lines(tree: dict[str, Path]) -> None:
    (tree["ws"] / "src" / "calc.py").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(PlanRejected, match=r"occurs more than once in src/calc\.py \(at lines 1 and 2\)"):
        prepare(plan(("src/calc.py", "x = 1", "x = 2")), boundary(tree), CAPS)


def test_overlapping_occurrences_count_as_ambiguous(tree: dict[str, Path]) -> None:
    (tree["ws"] / "src" / "calc.py").write_text("aaa\n")
    with pytest.raises(PlanRejected, match=r"occurs more than once .*twice on line 1"):
        prepare(plan(("src/calc.py", "aa", "b")), boundary(tree), CAPS)


def test_edit_computes_new_content_and_line_counts(tree: dict[str, Path]) -> None:
    before = snapshot(tree["ws"])
    [change] = prepare(plan(("src/calc.py", "a - b", "a + b")), boundary(tree), CAPS)
    assert change.rel == "src/calc.py"
    assert change.old == b"def add(a, b):\n    return a - b\n"
    assert change.new == b"def add(a, b):\n    return a + b\n"
    assert (change.added, change.removed) == (1, 1)
    assert change.mode == (tree["ws"] / "src" / "calc.py").stat().st_mode & 0o7777
    assert snapshot(tree["ws"]) == before  # prepare never writes


def test_empty_search_creates_a_missing_file_with_new_parents(tree: dict[str, Path]) -> None:
    [change] = prepare(plan(("docs/new/guide.md", "", "# Guide\n\nText\n")), boundary(tree), CAPS)
    assert change.old is None and change.mode is None
    assert change.new == b"# Guide\n\nText\n"
    assert (change.added, change.removed) == (3, 0)
    assert not (tree["ws"] / "docs").exists()


def test_empty_search_on_existing_file_is_rejected(tree: dict[str, Path]) -> None:
    with pytest.raises(PlanRejected, match="already exists"):
        prepare(plan(("src/calc.py", "", "x\n")), boundary(tree), CAPS)


def test_non_empty_search_on_missing_file_is_rejected(tree: dict[str, Path]) -> None:
    with pytest.raises(PlanRejected, match="does not exist"):
        prepare(plan(("src/nope.py", "x", "y")), boundary(tree), CAPS)


def test_several_edits_on_one_file_apply_in_sequence(tree: dict[str, Path]) -> None:
    p = plan(
        ("src/calc.py", "a - b", "a + b"),
        ("src/calc.py", "def add(a, b):", "def add(a: int, b: int) -> int:"),
        ("src/calc.py", "a + b\n", "a + b  # fixed\n"),
    )
    [change] = prepare(p, boundary(tree), CAPS)
    assert change.new == b"def add(a: int, b: int) -> int:\n    return a + b  # fixed\n"
    assert (change.added, change.removed) == (2, 2)


def test_create_then_edit_same_file_in_one_plan(tree: dict[str, Path]) -> None:
    p = plan(("notes.md", "", "one\ntwo\n"), ("notes.md", "two", "three"))
    [change] = prepare(p, boundary(tree), CAPS)
    assert change.old is None and change.new == b"one\nthree\n"


def test_later_edit_sees_the_earlier_edit_of_the_same_file(tree: dict[str, Path]) -> None:
    p = plan(("src/calc.py", "a - b", "a + b"), ("src/calc.py", "a - b", "oops"))
    with pytest.raises(PlanRejected, match="not found"):
        prepare(p, boundary(tree), CAPS)


def test_binary_file_is_rejected(tree: dict[str, Path]) -> None:
    (tree["ws"] / "blob.bin").write_bytes(b"abc\x00def")
    with pytest.raises(PlanRejected, match="binary"):
        prepare(plan(("blob.bin", "abc", "xyz")), boundary(tree), CAPS)


def test_undecodable_file_is_rejected(tree: dict[str, Path]) -> None:
    (tree["ws"] / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(PlanRejected, match="UTF-8"):
        prepare(plan(("latin.txt", "caf", "tea")), boundary(tree), CAPS)


def test_file_growing_over_the_size_cap_is_rejected(tree: dict[str, Path]) -> None:
    caps = Caps(max_edits=10, max_lines=10_000, max_file_bytes=100)
    with pytest.raises(PlanRejected, match=r"src/calc.py.*max_file_bytes 100"):
        prepare(plan(("src/calc.py", "a - b", "a + b" + "#" * 100)), boundary(tree), caps)
    # At the cap exactly is fine.
    body = "x" * 100
    [change] = prepare(plan(("big.txt", "", body)), boundary(tree), caps)
    assert len(change.new) == 100


def test_too_many_edits_is_rejected_naming_the_cap(tree: dict[str, Path]) -> None:
    edits = [(f"f{i}.txt", "", "x\n") for i in range(4)]
    with pytest.raises(PlanRejected, match="4 edits, over the edit cap of 3"):
        prepare(plan(*edits), boundary(tree), Caps(max_edits=3, max_lines=100, max_file_bytes=1000))
    assert len(prepare(plan(*edits[:3]), boundary(tree), Caps(3, 100, 1000))) == 3


def test_too_many_lines_is_rejected_naming_the_cap(tree: dict[str, Path]) -> None:
    p = plan(("a.txt", "", "1\n2\n3\n"), ("b.txt", "", "4\n5\n"))
    with pytest.raises(PlanRejected, match="5 lines, over the line cap of 4"):
        prepare(p, boundary(tree), Caps(max_edits=10, max_lines=4, max_file_bytes=1000))
    assert len(prepare(p, boundary(tree), Caps(10, 5, 1000))) == 2


def test_zero_edit_budget_rejects_any_edit_but_accepts_a_report_only_plan(tree: dict[str, Path]) -> None:
    caps = Caps(max_edits=0, max_lines=100, max_file_bytes=1000)
    assert prepare(Plan(summary="report", report="# r"), boundary(tree), caps) == []
    with pytest.raises(PlanRejected, match="edit cap of 0"):
        prepare(plan(("a.txt", "", "x\n")), boundary(tree), caps)


def test_scope_hook_sees_each_change_and_can_refuse(tree: dict[str, Path]) -> None:
    seen: list[str] = []

    def docs_only(change: FileChange) -> None:
        seen.append(change.rel)
        if not change.rel.endswith(".md"):
            raise PlanRejected(f"{change.rel}: outside the auto-doc scope")

    p = plan(("README.md", "", "hi\n"), ("src/calc.py", "a - b", "a + b"))
    with pytest.raises(PlanRejected, match=r"src/calc\.py: outside the auto-doc scope"):
        prepare(p, boundary(tree), CAPS, scope=docs_only)
    assert seen == ["README.md", "src/calc.py"]


def test_crlf_file_keeps_its_line_endings(tree: dict[str, Path]) -> None:
    (tree["ws"] / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    p = plan(("win.txt", "one\ntwo\n", "one\n2a\n2b\n"))
    [change] = prepare(p, boundary(tree), CAPS)
    assert change.new == b"one\r\n2a\r\n2b\r\nthree\r\n"
    assert (change.added, change.removed) == (2, 1)


def test_mixed_line_endings_are_matched_literally(tree: dict[str, Path]) -> None:
    (tree["ws"] / "mixed.txt").write_bytes(b"a\r\nb\nc\r\n")
    [change] = prepare(plan(("mixed.txt", "b\nc", "B\nC")), boundary(tree), CAPS)
    assert change.new == b"a\r\nB\nC\r\n"


def test_missing_final_newline_is_kept(tree: dict[str, Path]) -> None:
    (tree["ws"] / "nonl.txt").write_bytes(b"x = 1")
    [change] = prepare(plan(("nonl.txt", "1", "2")), boundary(tree), CAPS)
    assert change.new == b"x = 2"


def test_unchanged_result_yields_no_change(tree: dict[str, Path]) -> None:
    assert prepare(plan(("src/calc.py", "a - b", "a - b")), boundary(tree), CAPS) == []


def test_unified_diff_is_git_style(tree: dict[str, Path]) -> None:
    changes = prepare(
        plan(("src/calc.py", "a - b", "a + b"), ("docs/new.md", "", "# New\nline")),
        boundary(tree),
        CAPS,
    )
    diff = unified_diff(changes)
    lines = diff.splitlines()
    assert lines[:4] == [
        "diff --git a/src/calc.py b/src/calc.py",
        "--- a/src/calc.py",
        "+++ b/src/calc.py",
        "@@ -1,2 +1,2 @@",
    ]
    assert "-    return a - b" in lines and "+    return a + b" in lines
    i = lines.index("diff --git a/docs/new.md b/docs/new.md")
    assert lines[i + 1].startswith("new file mode 100")
    assert lines[i + 2 : i + 5] == ["--- /dev/null", "+++ b/docs/new.md", "@@ -0,0 +1,2 @@"]
    assert lines[i + 5 :] == ["+# New", "+line", "\\ No newline at end of file"]


def test_unified_diff_applies_with_git(tree: dict[str, Path], tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    changes = prepare(
        plan(("src/calc.py", "a - b", "a + b"), ("docs/new.md", "", "# New\n")), boundary(tree), CAPS
    )
    patch = tmp_path / "p.diff"
    patch.write_text(unified_diff(changes))
    subprocess.run(["git", "apply", str(patch)], cwd=tree["ws"], check=True, capture_output=True)
    for c in changes:
        assert c.path.read_bytes() == c.new


def test_the_line_cap_counts_removed_lines_as_well_as_added_ones(tree: dict[str, Path]) -> None:
    (tree["ws"] / "three.txt").write_text("1\n2\n3\n")
    p = plan(("three.txt", "1\n2\n3\n", "a\nb\nc\n"))  # 3 removed, 3 added
    with pytest.raises(PlanRejected, match="6 lines, over the line cap of 5"):
        prepare(p, boundary(tree), Caps(max_edits=10, max_lines=5, max_file_bytes=1000))
    [change] = prepare(p, boundary(tree), Caps(10, 6, 1000))
    assert (change.added, change.removed) == (3, 3)


def test_an_edit_that_changes_nothing_does_not_drop_the_edits_after_it(tree: dict[str, Path]) -> None:
    p = plan(("src/calc.py", "a - b", "a - b"), ("new.txt", "", "x\n"))
    assert [c.rel for c in prepare(p, boundary(tree), CAPS)] == ["new.txt"]


def test_a_file_up_to_the_read_limit_is_edited_whole_and_one_byte_more_is_refused(
    tree: dict[str, Path],
) -> None:
    from autod.act.edits import _READ_FACTOR

    caps = Caps(max_edits=10, max_lines=10_000, max_file_bytes=100)
    limit = caps.max_file_bytes * _READ_FACTOR  # a file may be shrunk to the cap from this size
    (tree["ws"] / "big.txt").write_text("x" * (limit - 5) + "tail\n")
    [change] = prepare(plan(("big.txt", "x" * (limit - 5), "")), boundary(tree), caps)
    assert (change.old is not None and len(change.old) == limit) and change.new == b"tail\n"
    (tree["ws"] / "big.txt").write_text("x" * (limit - 4) + "tail\n")
    with pytest.raises(PlanRejected, match=r"big\.txt: .*too large to edit"):
        prepare(plan(("big.txt", "x" * (limit - 4), "")), boundary(tree), caps)


def test_python_edits_get_their_artifacts_undone_and_other_files_are_left_as_written(
    tree: dict[str, Path],
) -> None:
    uses_re = "import os\n\n\ndef words(s):\n    return re.findall(r'\\w+', s)\n"
    [new] = prepare(plan(("src/words.py", "", uses_re)), boundary(tree), CAPS)
    assert new.new.decode().startswith("import os\nimport re\n")  # what the new code uses is imported
    [same] = prepare(plan(("notes.txt", "", uses_re)), boundary(tree), CAPS)
    assert same.new.decode() == uses_re


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="PEP 701: nested quotes parse from 3.12")
def test_a_python_edit_that_nests_its_own_quote_in_an_f_string_is_requoted(tree: dict[str, Path]) -> None:
    (tree["ws"] / "people.py").write_text("def full_name(user):\n    return user['first']\n")
    nested = "    return f'{user['first']} {user['last']}'\n"
    [change] = prepare(plan(("people.py", "    return user['first']\n", nested)), boundary(tree), CAPS)
    assert change.new.decode().endswith("return f\"{user['first']} {user['last']}\"\n")


def test_a_new_workspace_file_gets_0644_less_the_umask_autod_started_with() -> None:
    from autod.act.edits import new_file_mode

    old = os.umask(0o022)
    try:
        assert new_file_mode() == 0o644
        os.umask(0o027)
        assert new_file_mode() == 0o640
    finally:
        os.umask(old)


def test_the_original_is_read_without_following_or_waiting_on_what_was_swapped_in_after_the_walk(
    tree: dict[str, Path],
) -> None:
    from autod.act.edits import _read_original

    # resolve() walked the path and found a regular file; then a symlink or a named pipe took its
    # place: the read refuses both at once, never following the link nor waiting for a writer.
    swapped = tree["ws"] / "src" / "calc.py"
    swapped.unlink()
    swapped.symlink_to(tree["outside"] / "victim.txt")
    with pytest.raises(PlanRejected, match="cannot open"):
        _read_original("src/calc.py", swapped, 1000)
    swapped.unlink()
    os.mkfifo(swapped)
    with pytest.raises(PlanRejected, match="not a regular file"):
        _read_original("src/calc.py", swapped, 1000)
