"""A fix that stops calling a workspace definition and does its work inline is a symptom patch."""

from __future__ import annotations

from pathlib import Path

from autod.act.bypassed import bypassed_calls
from autod.act.edits import FileChange
from autod.candidates.compare import symptom_patch

VERSION = (
    "class Version:\n"
    "    def __init__(self, major, minor, patch):\n"
    "        self.major, self.minor, self.patch = major, minor, patch\n\n"
    "    @classmethod\n"
    "    def parse(cls, text):\n"
    "        return cls(*map(int, text.split('-')[0].split('.')))\n\n"
    "    def finalize_version(self):\n"
    "        return Version(self.minor, self.major, self.patch)\n\n"
    "    def release(self):\n"
    "        return Version(self.major, self.minor, self.patch)\n\n"
    "    def __str__(self):\n"
    "        return f'{self.major}.{self.minor}.{self.patch}'\n"
)
WRAPPER = (
    "from .version import Version\n\n\n"
    "def finalize_version(version):\n"
    "    verinfo = Version.parse(version)\n"
    "    return str(verinfo.finalize_version())\n"
)
INLINE = WRAPPER.replace(
    "return str(verinfo.finalize_version())",
    "return str(verinfo.major) + '.' + str(verinfo.minor) + '.' + str(verinfo.patch)")


def reader(files: dict[str, str]):
    return lambda rel: files.get(rel)


def test_a_wrapper_that_stops_calling_the_method_and_builds_the_result_itself_bypasses_it() -> None:
    found = bypassed_calls("pkg/_deprecated.py", WRAPPER, INLINE, reader({"pkg/version.py": VERSION}))
    assert [(b.name, b.function, b.defined_in) for b in found] == [
        ("finalize_version", "finalize_version", "pkg/version.py")]
    assert "fix it there" in found[0].reason()


def test_calling_another_workspace_definition_instead_or_fixing_the_callee_is_an_ordinary_change() -> None:
    files = {"pkg/version.py": VERSION}
    other = WRAPPER.replace("verinfo.finalize_version()", "verinfo.release()")
    assert bypassed_calls("pkg/_deprecated.py", WRAPPER, other, reader(files)) == []
    # the callee rewritten by the same candidate: it is being fixed, not bypassed
    assert bypassed_calls("pkg/_deprecated.py", WRAPPER, INLINE, reader(files),
                          lambda path, name: (path, name) == ("pkg/version.py", "finalize_version")) == []
    # a builtin or a library call dropped is no workspace definition
    lib = "import os\n\n\ndef home():\n    return os.path.expanduser('~')\n"
    assert bypassed_calls("pkg/paths.py", lib, lib.replace("os.path.expanduser('~')", "'/root'"),
                          reader({})) == []


def test_recursion_turned_into_a_loop_is_no_bypass() -> None:
    rec = "def total(xs):\n    return 0 if not xs else xs[0] + total(xs[1:])\n"
    loop = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"
    assert bypassed_calls("pkg/sums.py", rec, loop, reader({})) == []


def test_a_candidate_that_bypasses_the_method_is_a_suspect_fix_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "version.py").write_text(VERSION)
    path = tmp_path / "pkg" / "_deprecated.py"
    path.write_text(WRAPPER)
    change = FileChange("pkg/_deprecated.py", path, WRAPPER.encode(), INLINE.encode(), None, 1, 1)
    why = symptom_patch([change])
    assert why is not None and "no longer calls finalize_version (pkg/version.py)" in why
    # the same candidate that also fixes the method is not held back
    fixed = VERSION.replace("Version(self.minor, self.major", "Version(self.major, self.minor")
    both = [change, FileChange("pkg/version.py", tmp_path / "pkg" / "version.py", VERSION.encode(),
                               fixed.encode(), None, 1, 1)]
    assert symptom_patch(both) is None
