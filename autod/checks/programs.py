"""Which program a check runs, and which host paths running it needs, decided from the config alone.

argv[0] is looked up in the workspace's `.venv/bin`, then `venv/bin`, then autod's PATH. What the
sandbox binds back for it comes from what the operator configured: a program outside the workspace
(its symlinks, its interpreter, its venv, its install's `lib`) and every absolute path in `run`. A
program inside the workspace (the workspace venv's python, `./scripts/check.sh`) is visible in the
sandbox as it is, and where it points is not followed: a workspace file must never decide what of
the host a check sees. When it points into a place the sandbox hides, `hidden_hop` says where, and
the check runner refuses it with a message naming the fix.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autod.safety.saferead import read_untrusted_head

if TYPE_CHECKING:
    from autod.checks.mounts import MountTable

__all__ = [
    "VENV_DIRS",
    "ProgramError",
    "exposures",
    "find_venv",
    "hidden_hop",
    "module_run",
    "resolve_program",
    "runtime_paths",
    "shadowed_module",
]

VENV_DIRS = (".venv", "venv")
SHEBANG_DEPTH = 4
_LINK_HOPS = 40


class ProgramError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def find_venv(root: Path) -> Path | None:
    """The workspace's own virtualenv (`.venv`, then `venv`), if it has one."""
    for name in VENV_DIRS:
        if (root / name / "bin").is_dir():
            return root / name
    return None


def resolve_program(name: str, *, cwd: Path, venv: Path | None, path: str) -> Path:
    """argv[0] as the host sees it: a path (relative to the workspace), or the first executable of
    that name in the workspace's venv, then on PATH. ProgramError 127 (missing) or 126 (not runnable)."""
    if "/" in name:
        p = Path(name) if os.path.isabs(name) else cwd / name
        if not p.exists():
            raise ProgramError(127, f"{name}: no such file")
        if not p.is_file() or not os.access(p, os.X_OK):
            raise ProgramError(126, f"{name}: not an executable file")
        return p
    dirs = [venv / "bin"] if venv is not None else []
    # Relative PATH entries ('.', '') are skipped: they would run a file of the workspace by accident.
    dirs += [Path(d) for d in path.split(os.pathsep) if d and os.path.isabs(d)]
    not_runnable = None
    for d in dirs:
        p = d / name
        if p.is_file():
            if os.access(p, os.X_OK):
                return p
            not_runnable = not_runnable or p
    if not_runnable is not None:
        raise ProgramError(126, f"{name}: {not_runnable} is not executable")
    where = f"{venv}/bin nor on PATH" if venv else "the workspace's .venv/bin or venv/bin, nor on PATH"
    raise ProgramError(127, f"{name}: not found in {where}")


def module_run(argv: Sequence[str]) -> str | None:
    """MODULE of `python [options] -m MODULE ...` (the current directory comes first on its sys.path)."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    takes_value = {"-X", "-W", "-Q"}
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        tok = argv[i]
        if tok == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if tok.startswith("-m") and not tok.startswith("--"):
            return tok[2:] or None
        if tok == "-c" or tok.startswith("--"):
            return None
        i += 2 if tok in takes_value else 1
    return None


def shadowed_module(module: str, cwd: Path) -> str | None:
    """What in `cwd` would be imported for `python -m MODULE` instead of the installed module (a
    `pytest.py`, a `pytest/` package, a compiled `pytest.*.so` or `.pyc`), or None. A directory
    without `__init__` (a namespace portion) loses to the installed module and is no threat.

    `python -m` puts the current directory first on sys.path, and the project's own tests need it
    there (a flat layout imports the package from the root), so the directory stays; what must not
    be there is a stand-in for the runner itself, which could print any verdict."""
    import importlib.machinery

    top = module.split(".", 1)[0]
    if not top.isidentifier():
        return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(top, [str(cwd)])
    except (ImportError, OSError, ValueError):
        return None
    if spec is None or spec.loader is None:
        return None
    origin = spec.origin or top
    return os.path.relpath(origin, cwd) if os.path.isabs(origin) else origin


# -- following a configured program -----------------------------------------------------------


def _inside(p: Path, root: Path) -> bool:
    """`p` lies in `root`, by its own path or by where it really is."""
    r = os.path.realpath(root)
    return any(q == r or q.startswith(r + "/") for q in (os.path.abspath(p), os.path.realpath(p)))


def _link_chain(p: Path, stop: Path | None) -> list[Path]:
    """`p` and every symlink hop after it (and its real path); a hop into `stop` ends the walk there."""
    out = [Path(os.path.abspath(p))]
    cur = out[0]
    for _ in range(_LINK_HOPS):
        if (stop is not None and _inside(cur, stop)) or not cur.is_symlink():
            return out
        cur = Path(os.path.normpath(cur.parent / os.readlink(cur)))
        out.append(cur)
    return out


def _interpreter(p: Path, path: str) -> Path | None:
    try:
        head = read_untrusted_head(p, 256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        name = next((w for w in words[1:] if not w.startswith("-")), None)
        found = shutil.which(name, path=path) if name else None
        return Path(found) if found else None
    return Path(words[0])


def _walk(program: Path, path: str, stop: Path | None) -> list[tuple[Path, str]]:
    """Every path running `program` goes through, with how it got there: its symlink hops, then its
    interpreter's, SHEBANG_DEPTH deep. With `stop`, nothing under it is followed."""
    out: list[tuple[Path, str]] = []
    todo: list[tuple[Path, str]] = [(program, "the program")]
    for _ in range(SHEBANG_DEPTH):
        if not todo:
            break
        p, how = todo.pop()
        chain = _link_chain(p, stop)
        out += [(q, how if i == 0 else f"a symlink from {chain[i - 1]}") for i, q in enumerate(chain)]
        last = chain[-1]
        if stop is not None and _inside(last, stop):
            continue
        real = Path(os.path.realpath(last))
        if real != last:
            out.append((real, f"the real path of {last}"))
        interp = _interpreter(real, path)
        if interp is not None:
            todo.append((interp, f"the interpreter {real} names"))
    return out


def runtime_paths(program: Path, path: str, *, stop: Path | None = None) -> list[Path]:
    """What running a configured `program` reads besides itself: its symlink chain, its interpreter
    (shebang, `env NAME`), each one's install `lib` (Python's stdlib) and the venv a python belongs
    to. Nothing under `stop` (the workspace) is followed or returned."""
    hops = [q for q, _ in _walk(program, path, stop)]
    out: list[Path] = []
    for q in hops:
        if stop is not None and _inside(q, stop):
            continue
        out.append(q)
        # A venv's python is a symlink to its base interpreter; what makes it the venv's is the
        # pyvenv.cfg beside its bin/ and the venv's site-packages: the whole venv, read-only.
        if (q.parent.parent / "pyvenv.cfg").is_file():
            out.append(q.parent.parent)
        if q.parent.name == "bin" and not q.is_symlink():
            out += [q.parent.parent / lib for lib in ("lib", "lib64") if (q.parent.parent / lib).is_dir()]
    seen: set[Path] = set()
    return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def exposures(program: Path, args: Sequence[str], *, workspace: Path, path: str) -> list[Path]:
    """The host paths a configured command needs even where the sandbox hides them, bound back
    read-only: the runtime of its program when that lies outside the workspace, and every file or
    directory its command line names by absolute path (`python /opt/ci/check.py`, `--rcfile=/etc/x`):
    the operator wrote those. Nothing inside the workspace: its files are visible as they are."""
    named = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if os.path.isabs(value) and os.path.exists(value) and not _inside(Path(value), workspace):
            named.append(Path(value))
    roots = [program] if not _inside(program, workspace) else []
    roots += [p for p in named if p.is_file() and os.access(p, os.X_OK)]
    out: list[Path] = [p for p in named if p not in roots]
    for r in roots:
        out += runtime_paths(r, path, stop=workspace)
    return out


def hidden_hop(program: Path, path: str, table: MountTable) -> tuple[Path, str] | None:
    """The first place running `program` goes through that the sandbox hides, and how it got there;
    None when the check can run all the way. Read on the host to explain a refusal, never to mount."""
    for q, how in _walk(program, path, None):
        if table.hidden(where := Path(os.path.abspath(q))):
            return q, f"{how}; {hiding_rule(where, table)}"
    return None


def hidden_named(args: Sequence[str], *, workspace: Path, table: MountTable) -> tuple[Path, str] | None:
    """The script the command runs (its first argument, `python /opt/ci/check.py`) when the check would
    not see it, with the rule that hides it; None when it is mounted. A check that cannot open its own
    script is a start error, never a failure for the planner. (Later arguments are data: a hidden one
    stays hidden and the check runs.)"""
    first = next((a for a in args if not a.startswith("-")), None)
    if first is None or args[: args.index(first)]:
        return None  # options first (`python -m mod`, `sh -c '...'`): no script named
    p = Path(os.path.abspath(first)) if os.path.isabs(first) else None
    if p is None or _inside(p, workspace) or not os.path.isfile(p) or not table.hidden(p):
        return None
    return p, hiding_rule(p, table)


def hiding_rule(path: Path, table: MountTable) -> str:
    """Why the sandbox does not show `path`: a credential glob (never bound back), or the hidden place."""
    from autod.safety.boundary import glob_match
    from autod.safety.protected import CREDENTIAL_GLOBS

    rel = path.as_posix().lstrip("/")
    glob = next((g for g in CREDENTIAL_GLOBS if glob_match(g, rel)), None)
    if glob is not None:
        return f"its path matches the credential glob {glob!r}, and a credential path is never bound back"
    return f"it lies in {table.hider(path)}, which the sandbox hides from every check"
