"""The judges of a fix are not the fix's to change.

A weak model asked to make a failing test pass will, often enough, edit the test. The judges of a
writing mode are:
- the files its `judge_globs` match (tests, conftest.py, pytest.ini, tox.ini, setup.cfg, ...);
- the checks' own scripts: a workspace file a check runs (`./scripts/check.sh`, `python ci/lint.py`),
  every path given to a test runner (`pytest spec/unit`), a config file named by an option
  (`--config-file=mypy.ini`), and the config files of the tools the checks run (`ruff.toml`, ...);
- `pyproject.toml`, but only when an edit changes the settings the checks read: `[tool.pytest*]`,
  `[tool.coverage*]`, `[tool.tox]`, `[tool.nox]`, `[tool.<X>]` for every tool X a check runs, and
  the test/dev extras and dependency groups. Other pyproject edits pass.
- whatever the operator's globs say, pytest's own configuration and entry points
  (`autod.safety.protected.RUNNER_GLOBS`: pytest.ini, .pytest.ini, pytest.toml, .pytest.toml, tox.ini,
  setup.cfg, every conftest.py, a pytest/_pytest/pluggy module anywhere importable, *.pth,
  site/usercustomize), and pyproject's `[build-system]`, entry points and scripts;
- a Python edit to the code under test that adds a reach into the test runner (`autod.act.reach`);
- in a fixing mode, a file it may not create (`autod.act.allowance`: only modules inside packages).

Paths are compared normalised (`normal_rel`: `src/../x.sh` is `x.sh`) and spelled as the filesystem
has them (on a case-insensitive one, `Scripts/Check.sh` is `scripts/check.sh`).

By default such a plan is refused with a reason that teaches the re-plan what to do instead. With
`allow_judge_edits: true` it is not refused, but `requires_approval` makes the cycle store it as a
proposal even when confirmation is off: a human looks at every edit to a judge.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from autod.act.allowance import new_file_refusal
from autod.act.judged_modules import introduced_here
from autod.config.settings import DebugMode, DocMode
from autod.errors import PlanRejected
from autod.safety.boundary import glob_match
from autod.safety.protected import RUNNER_GLOBS

if TYPE_CHECKING:
    from collections.abc import Iterable

    from autod.act.edits import FileChange, ScopeCheck
    from autod.config.settings import Settings
    from autod.safety.boundary import Boundary

__all__ = ["Judges", "editable_paths", "normal_rel", "requires_approval"]

# Globs whose files configure the checks (the rest of the defaults are tests themselves).
_CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "noxfile.py", ".coveragerc"})
_INTERPRETERS = frozenset({"python", "python3", "sh", "bash", "dash", "zsh", "node", "ruby", "perl", "env"})
_TEST_RUNNERS = frozenset({"pytest", "py.test", "unittest", "nose2", "tox", "nox", "ward", "behave", "hatch"})
# Config files of common check tools, judged when the tool is a configured check.
_TOOL_FILES: dict[str, tuple[str, ...]] = {
    "ruff": ("ruff.toml", ".ruff.toml"),
    "mypy": ("mypy.ini", ".mypy.ini"),
    "flake8": (".flake8",),
    "pylint": (".pylintrc", "pylintrc"),
    "black": (),
    "isort": (".isort.cfg",),
    "pyright": ("pyrightconfig.json",),
    "eslint": (".eslintrc", ".eslintrc.js", ".eslintrc.json", ".eslintrc.yml", "eslint.config.js"),
    "jest": ("jest.config.js", "jest.config.ts"),
    "vitest": ("vitest.config.ts", "vitest.config.js"),
}
_ALWAYS_TOOLS = frozenset({"pytest", "coverage", "tox", "nox"})
_TEST_EXTRAS = frozenset({"test", "tests", "testing", "dev", "lint", "check", "ci"})
# pyproject tables that make the next install run or register code (a build backend, a pytest11 plugin).
_INSTALL_TABLES = (("build-system",), ("project", "entry-points"), ("project", "scripts"),
                   ("project", "gui-scripts"), ("tool", "setuptools", "cmdclass"))
_CONFIG_OPTIONS = ("config", "rcfile", "ini", "settings", "rootdir", "conftest")


@dataclass(frozen=True)
class _Script:
    rel: str
    is_dir: bool
    check: str


@dataclass(frozen=True)
class Judges:
    """The judge rules of one writing mode."""

    mode: str
    globs: tuple[str, ...]
    scripts: tuple[_Script, ...]
    tools: frozenset[str]
    allow: bool
    workspace: Path | None = None  # where paths are spelled as the filesystem has them
    fixing: bool = False  # a fixing mode: what it may create is an allowance (autod.act.allowance)

    @classmethod
    def for_settings(cls, settings: Settings, mode: str) -> Judges | None:
        """The rules for `mode`, or None when its config has no judges (auto-plan writes no code)."""
        try:
            cfg = settings.modes.get(mode)
        except KeyError:
            return None
        if not isinstance(cfg, DebugMode | DocMode):  # auto-plan writes no code: nothing judges it
            return None
        scripts: list[_Script] = []
        tools: set[str] = set(_ALWAYS_TOOLS)
        for name, check in settings.checks.items():
            found, tool = _check_paths(settings.workspace, check.run)
            scripts += [_Script(rel, is_dir, name) for rel, is_dir in found]
            if tool:
                tools.add(tool)
        globs = list(cfg.judge_globs) + [f for t in sorted(tools) for f in _TOOL_FILES.get(t, ())]
        ws = Path(os.path.realpath(settings.workspace))
        scripts = [_Script(normal_rel(s.rel, ws), s.is_dir, s.check) for s in scripts]
        fixing = isinstance(cfg, DebugMode)  # auto-doc creates pages
        allow = bool(cfg.allow_judge_edits)
        return cls(mode, tuple(globs), tuple(scripts), frozenset(tools), allow, ws, fixing)

    def judged(self, change: FileChange) -> str | None:
        """Why the change edits a judge (a reason that tells the re-plan what to do instead), or None."""
        rel = normal_rel(change.rel, self.workspace)
        why = self.judged_path(rel)
        if why:
            return why
        name = PurePosixPath(rel).name
        if name == "pyproject.toml":
            table = _pyproject_judged(change.old, change.new, self.tools)
            if table:
                return (
                    f"{rel}: the edit changes {table}, which configures the checks that judge this fix;"
                    f" {self.mode} may not change it - change the code so the checks pass as configured"
                    " (other pyproject.toml edits are fine)"
                )
        if name.endswith((".py", ".pyw")):
            added = introduced_here(_text(change.old), _text(change.new) or "", self.globs, self.workspace)
            if added:
                return (
                    f"{rel}: the edit adds {'; '.join(added[:6])}, which reach into the test runner that"
                    f" judges this fix (its modules, hooks, sys.modules, stack frames, the process's exit,"
                    f" the tests' modules, other modules' state); {self.mode} may not: fix the code"
                    " under test itself, with plain Python, so the failing tests pass as written"
                )
        if change.old is None and self.fixing and self.workspace is not None:
            return new_file_refusal(rel, self.workspace)
        return None

    def judged_path(self, rel: str) -> str | None:
        """Why any edit of `rel` edits a judge, or None (pyproject.toml is judged by content instead)."""
        rel = normal_rel(rel, self.workspace)
        for pattern in self.globs:
            if glob_match(pattern, rel):
                if PurePosixPath(rel).name.lower() in _CONFIG_NAMES or "/" not in pattern.strip("/"):
                    return (
                        f"{rel} configures the checks that judge this fix; {self.mode} may not edit it"
                        " - change the code so the checks pass as configured"
                    )
                return (
                    f"{rel} is a test that judges this fix; {self.mode} may not edit it"
                    " - change the code under test so the test passes"
                )
        for pattern in RUNNER_GLOBS:
            if glob_match(pattern, rel):
                return (
                    f"{rel} configures or loads the test runner ({pattern!r}) that judges this fix;"
                    f" {self.mode} may not edit it - change the code under test so the tests pass as"
                    " configured"
                )
        for script in self.scripts:
            if rel == script.rel or (script.is_dir and rel.startswith(script.rel + "/")):
                return (
                    f"{rel} is run by check {script.check!r} to judge this fix; {self.mode} may not edit it"
                    " - change the code so the check passes as it is"
                )
        return None

    def scope(self) -> ScopeCheck:
        """The act-rule hook: refuses a change to a judge, unless the operator allows it (then approval)."""

        def check(change: FileChange) -> None:
            if self.allow:
                return
            why = self.judged(change)
            if why:
                raise PlanRejected(why)

        return check

    def touched(self, changes: list[FileChange]) -> list[str]:
        """The judges among the changes (a permitted judge edit always needs approval)."""
        return [c.rel for c in changes if self.judged(c)]


def editable_paths(shown: Iterable[str | None], boundary: Boundary, judges: Judges | None) -> tuple[str, ...]:
    """The shown workspace files a plan may edit: those the boundary lets it write, less the judges
    (unless the operator allows judge edits, which then wait for approval). Sorted, each once."""
    out: set[str] = set()
    for rel in shown:
        if not rel or rel in out:
            continue
        try:
            norm, path = boundary.resolve(rel)
        except PlanRejected:
            continue
        if not path.is_file():
            continue
        if judges is not None and not judges.allow and judges.judged_path(norm):
            continue
        out.add(norm)
    return tuple(sorted(out))


def requires_approval(settings: Settings, mode: str, changes: list[FileChange]) -> list[str]:
    """Judges the changes edit when the operator allowed judge edits (they then wait for approval)."""
    judges = Judges.for_settings(settings, mode)
    if judges is None or not judges.allow:
        return []
    return judges.touched(changes)


# -- paths as the judges compare them -----------------------------------------------------------


def normal_rel(rel: str, workspace: Path | None = None) -> str:
    """`rel` as a judge compares it: posix-normalised (no `.` or `..` parts, no duplicate, leading or
    trailing slashes) and, under `workspace`, each existing part spelled as the filesystem has it."""
    norm = posixpath.normpath(rel).lstrip("/")
    if norm in ("", "."):
        return ""
    return _as_on_disk(workspace, norm) if workspace is not None else norm


def _as_on_disk(workspace: Path, rel: str) -> str:
    """A case-insensitive filesystem takes `Tests/X.py` for `tests/x.py`: use the names it has."""
    parts = rel.split("/")
    cur = workspace
    for i, part in enumerate(parts):
        if part == "..":
            return rel  # above the workspace: nothing of ours to spell
        try:
            names = os.listdir(cur)
        except OSError:
            return "/".join(parts)  # not a directory (yet): the rest is spelled as given
        if part not in names:
            same = [n for n in names if n.casefold() == part.casefold()]
            if len(same) == 1 and os.path.lexists(cur / part):  # the filesystem folds case
                parts[i] = same[0]
        cur = cur / parts[i]
    return "/".join(parts)


# -- the checks' own scripts ------------------------------------------------------------------


def _check_paths(workspace: Path, run: str) -> tuple[list[tuple[str, bool]], str | None]:
    """Workspace paths a check command runs or tests, and the tool it runs."""
    try:
        argv = shlex.split(run)
    except ValueError:
        return [], None
    if not argv:
        return [], None
    found: list[tuple[str, bool]] = []
    head = Path(argv[0]).name
    tool: str | None = None
    i = 1
    script_next = False
    if head in _INTERPRETERS or head.startswith("python"):
        if head == "env" and len(argv) > 1:
            head, i = Path(argv[1]).name, 2
        script_next = True
    else:
        tool = head
        _add(workspace, argv[0], found)  # ./scripts/check.sh
    while i < len(argv):
        tok = argv[i]
        i += 1
        if script_next:
            if tok == "-m" and i < len(argv):
                tool = argv[i].split(".")[0]
                i += 1
                script_next = False
                continue
            if tok == "-c":
                return found, tool  # inline code: nothing on disk to protect
            if tok.startswith("-"):
                continue
            script_next = False
            tool = Path(tok).stem
            _add(workspace, tok, found)  # python ci/lint.py
            continue
        if tok.startswith("-"):
            name, _, value = tok.partition("=")
            if value and any(word in name.lower() for word in _CONFIG_OPTIONS):
                _add(workspace, value, found)  # --config-file=mypy.ini
            continue
        if tool in _TEST_RUNNERS:
            _add(workspace, tok.split("::")[0], found)  # pytest spec/unit tests/test_x.py::test_y
    return found, tool


def _add(workspace: Path, token: str, found: list[tuple[str, bool]]) -> None:
    if not token or "\x00" in token:
        return
    p = Path(token)
    p = p if p.is_absolute() else workspace / p
    try:
        real = Path(os.path.realpath(p))
        ws = Path(os.path.realpath(workspace))
        if real == ws or ws not in real.parents or not real.exists():
            return  # `.` or a path outside: the workspace as a whole is not a judge
        found.append((real.relative_to(ws).as_posix(), real.is_dir()))
    except (OSError, ValueError):
        return


# -- pyproject.toml ---------------------------------------------------------------------------


def _pyproject_judged(old: bytes | None, new: bytes, tools: frozenset[str]) -> str | None:
    """The first check-related table the edit changes (`[tool.pytest]`, ...), or None."""
    before = _toml(old) if old is not None else {}
    after = _toml(new)
    if after is None:
        return "the file's TOML (it would no longer parse)"
    before = before or {}
    for tool in sorted(tools):
        old_t = _get(before, "tool", tool)
        new_t = _get(after, "tool", tool)
        if old_t != new_t:
            return f"[tool.{tool}]"
    for table in _INSTALL_TABLES:
        if _get(before, *table) != _get(after, *table):
            return f"[{'.'.join(table)}] (what the next install runs or registers)"
    for section in (("project", "optional-dependencies"), ("dependency-groups",)):
        old_s, new_s = _get(before, *section) or {}, _get(after, *section) or {}
        for name in sorted(set(old_s) | set(new_s)):
            if name.lower() in _TEST_EXTRAS and old_s.get(name) != new_s.get(name):
                return f"[{'.'.join(section)}] {name}"
    return None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _toml(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def _get(doc: dict[str, Any], *keys: str) -> Any:
    cur: Any = doc
    for key in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


# -- what `autod config check` shows ----------------------------------------------------------


def rule_lines(settings: Settings) -> list[str]:
    """The effective file rules, one line each: what no plan edits or prompt reads, and the judges."""
    from autod.safety.boundary import own_files
    from autod.safety.protected import CREDENTIAL_GLOBS, RUNS_CODE_GLOBS

    lim = settings.limits

    def joined(globs: Iterable[str]) -> str:
        return ", ".join(globs) or "none"

    lines = [
        "never read or edited: .git, the state dir, autod's own files ("
        + joined(str(p) for p in own_files(settings)) + ")",
        f"deny (credentials, never read or edited): {joined(CREDENTIAL_GLOBS)}"
        + (f"; limits.deny_globs: {joined(lim.deny_globs)}" if lim.deny_globs else ""),
        f"no-write (files that make tools run code, never edited): {joined(RUNS_CODE_GLOBS)}"
        + (f"; limits.no_write_globs: {joined(lim.no_write_globs)}" if lim.no_write_globs else ""),
        f"allow (exempt from the built-in deny and no-write globs): {joined(lim.allow_globs)}",
    ]
    for mode in ("auto-debug", "auto-doc"):
        if mode not in settings.modes.enabled():
            continue
        judges = Judges.for_settings(settings, mode)
        if judges is None:
            continue
        scripts = joined(sorted({s.rel + ("/" if s.is_dir else "") for s in judges.scripts}))
        how = "approval" if judges.allow else "refused"
        lines.append(
            f"judges ({mode}, edits {how}): {joined(judges.globs)}; always: {joined(RUNNER_GLOBS)},"
            f" pyproject [tool.{{{','.join(sorted(judges.tools))}}}] and install tables, Python edits"
            f" that reach into the test runner; check scripts: {scripts}"
        )
    return lines
