"""What each test did in a check run, from autod's own recorder, and how a check's Python is started.

Every check run gets two directories autod owns, outside the workspace: `lib/` (read-only in the
sandbox) holds autod's import guard as `sitecustomize.py` (autod.checks.judge_guard) and its pytest
recorder as `autod_verdicts.py` (autod.checks.judge_plugin); `out/` (writable) holds the pipe of keys
that seal the recorder's records (autod.checks.seal) and receives each pytest session's sealed
`results-<fingerprint>.json`. The check's environment puts `lib/` first on PYTHONPATH and names the
recorder in PYTEST_PLUGINS, so any Python or pytest the check starts loads both from autod, never from
the workspace. `load` reads `out/` back with the one safe read (no FIFO, no symlink, capped): what a
test process wrote there is as untrusted as its output, and counts only under a seal that verifies.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import structlog

from autod.checks import heard, seal
from autod.safety.saferead import read_untrusted
from autod.walk import remove_tree

__all__ = ["CANDIDATE_FILES", "JudgeDirs", "PerTestReport", "load", "loads_into", "make_dirs", "remove_dirs"]

PLUGIN = "autod_verdicts"
# The files (workspace-relative) of the candidate whose checks run in this context: set around a
# verification (autod.modes.verifying), read when a check starts; its files may not reach into the
# runner (autod.checks.judge_reach). Empty: no candidate (a plain run, the run before any candidate).
CANDIDATE_FILES: ContextVar[tuple[str, ...]] = ContextVar("autod_candidate_files", default=())
MAX_RESULTS_BYTES = 32 << 20  # all result files of one run together
MAX_RESULT_FILES = seal.KEYS  # pytest sessions of one check run that are heard (each seals with a key)
_RESULT_NAME = re.compile(r"results-[0-9a-f]{16}\.json")
log = structlog.get_logger("autod.checks")
_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4, "error": 5}
FAILING = frozenset({"failed", "error"})
MAX_NAMED = 1001  # runner parts read from one record (the recorder names 1,000, then counts the rest)


@dataclass(frozen=True)
class PerTestReport:
    """Per-test outcomes of one check run (every pytest process it started, merged)."""

    outcomes: Mapping[str, str]
    collected: frozenset[str]
    collect_errors: tuple[str, ...] = ()
    # the test runner's parts (pytest's, pluggy's, unittest's, builtins', the import system's, the
    # recorder's functions and classes) that were not what they were when the recorder loaded, in any
    # of the run's processes;
    # `foreign`: those whose new value is code from the workspace or no installed module's code
    runner: frozenset[str] = frozenset()
    foreign: frozenset[str] = frozenset()
    # what each test ran (autod.checks.judge_path `ran`: its function and the names it reads), as every
    # session that ran it said, told or recorded; a test none said anything of is not here
    ran: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def failing(self) -> frozenset[str]:
        return frozenset(t for t, o in self.outcomes.items() if o in FAILING)

    @property
    def passed(self) -> frozenset[str]:
        return frozenset(t for t, o in self.outcomes.items() if o == "passed")

    @property
    def seen(self) -> frozenset[str]:
        """Every test the run collected or reported."""
        return self.collected | frozenset(self.outcomes)

    def record(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.outcomes.values():
            counts[o] = counts.get(o, 0) + 1
        if self.collect_errors:
            counts["collect_errors"] = len(self.collect_errors)
        return counts


@dataclass(frozen=True)
class JudgeDirs:
    lib: Path  # bound read-only: the guard and the recorder
    out: Path  # bound writable: the recorder's result files, and the pipe of keys that seal them
    keys: seal.Keys
    channel: heard.Channel  # what each recorder tells autod as it hears it (autod.checks.heard)

    def env(self, workspace: Path, own: Mapping[str, str]) -> dict[str, str]:
        """The variables that load the guard and the recorder into every Python the check starts, kept
        beside the check's own (`own`: its PYTHONPATH entries, PYTEST_PLUGINS and PYTEST_ADDOPTS). The
        recorder is named twice: by `-p` first in PYTEST_ADDOPTS, which pytest loads before the plugins
        of installed distributions' entry points and of PYTEST_PLUGINS (any of which may be the
        project's own code, which must not run before it has taken its key: autod.checks.seal), and in
        PYTEST_PLUGINS, for a pytest that reads no PYTEST_ADDOPTS."""
        path = os.pathsep.join(p for p in (str(self.lib), own.get("PYTHONPATH", "")) if p)
        return {
            "PYTHONPATH": path,
            "PYTEST_PLUGINS": ",".join(p for p in (own.get("PYTEST_PLUGINS", ""), PLUGIN) if p),
            "PYTEST_ADDOPTS": " ".join(p for p in (f"-p {PLUGIN}", own.get("PYTEST_ADDOPTS", "")) if p),
            "_AUTOD_JUDGE_WS": str(workspace),
            "_AUTOD_JUDGE_OUT": str(self.out),
            "_AUTOD_JUDGE_KEYS": str(self.keys.path),
            **self.channel.env(),
            "_AUTOD_JUDGE_FIRST": "",  # no process of the check is the first recorder's but by its own
            "_AUTOD_JUDGE_CHANGED": json.dumps(list(CANDIDATE_FILES.get())) if CANDIDATE_FILES.get() else "",
        }


def make_dirs() -> JudgeDirs:
    """A fresh pair of directories for one check run (blocking); `remove_dirs` after it."""
    root = Path(tempfile.mkdtemp(prefix="autod-judge-"))
    lib, out = root / "lib", root / "out"
    lib.mkdir()
    out.mkdir()
    pkg = resources.files("autod.checks")
    (lib / "sitecustomize.py").write_bytes(pkg.joinpath("judge_guard.py").read_bytes())
    (lib / f"{PLUGIN}.py").write_bytes(pkg.joinpath("judge_plugin.py").read_bytes())
    (lib / "autod_reach.py").write_bytes(pkg.joinpath("judge_reach.py").read_bytes())
    for part in ("wire", "path", "ran"):  # the recorder's parts, beside it
        (lib / f"autod_{part}.py").write_bytes(pkg.joinpath(f"judge_{part}.py").read_bytes())
    for f in lib.iterdir():
        f.chmod(0o444)
    lib.chmod(0o555)
    return JudgeDirs(lib, out, seal.issue(out), heard.open_channel())


def remove_dirs(dirs: JudgeDirs) -> None:
    root = dirs.lib.parent
    dirs.keys.close()
    dirs.channel.close()
    with contextlib.suppress(OSError):
        dirs.lib.chmod(0o755)
    remove_tree(root)


def loads_into(argv: Sequence[str]) -> bool:
    """Whether the guard and the recorder can load into the command's Python: not when the command
    starts Python isolated (`-I`), ignoring PYTHON* variables (`-E`) or without `site` (`-S`); such a
    check is judged by its exit code alone (`autod config check` says so)."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return True
    for arg in argv[1:]:
        if not arg.startswith("-") or arg.startswith("--"):
            return True
        for ch in arg[1:]:
            if ch in "IES":
                return False
            if ch in "mc":
                return True  # the module or command follows: no more interpreter options
            if ch in "WX":
                break  # the rest of this word is the option's value
    return True


def load(dirs: JudgeDirs) -> PerTestReport | None:
    """The merged per-test report of a check run, or None when no pytest session left a sealed record,
    or when the records cannot be trusted (autod.checks.seal.unsealed_why): a failed run (blocking).

    Only names the recorder writes are read, each with the safe read, and each must carry a seal that
    verifies. Of one process's sessions the first speaks for it (inner ones, as pytester runs them, do
    not; two that say they are first are a failed run); a pytest-xdist worker's record and a pytest that
    ran no session add nothing. A session that had the recorder's channel is judged by what it told
    there as it heard it (autod.checks.heard), its record only worsening that. A test's outcome is the
    worst of all the sessions that name it."""
    try:
        names = sorted(e.name for e in os.scandir(dirs.out) if _RESULT_NAME.fullmatch(e.name))
    except OSError:
        return None
    sealed: dict[str, dict[str, Any]] = {}
    budget = MAX_RESULTS_BYTES
    for name in names[:MAX_RESULT_FILES]:
        try:
            data = read_untrusted(dirs.out / name, cap=budget)
        except OSError:
            continue
        budget -= len(data)
        if (got := seal.opened(dirs.keys, data)) is not None and name == f"results-{got[0]}.json":
            sealed[got[0]] = got[1]
    if why := seal.unsealed_why(dirs.keys, names, sealed):
        log.warning("check.results_unsealed", why=why)
        return None
    told = heard.outcomes(dirs.channel.messages)
    if dirs.channel.overflowed:
        log.warning("check.results_unsealed", why="more was told on the recorder's channel than autod reads")
        return None
    first: dict[Any, tuple[str, dict[str, Any]]] = {}  # per process: its first recorder's record
    for fp, doc in sealed.items():
        if doc.get("first") is not True:
            continue  # a pytest run inside another (pytester), or a copy of the recorder imported again
        if type(doc.get("pid")) is not int:  # sealed with a key something else took: any value
            log.warning("check.results_unsealed", why="a record whose process id is not a number")
            return None
        if doc.get("pid") in first:
            log.warning("check.results_unsealed", why=f"two first sessions in process {doc.get('pid')}")
            return None
        first[doc.get("pid")] = (fp, doc)
    docs = [doc for _, doc in first.values()]
    outcomes: dict[str, str] = {}
    collected: set[str] = set()
    errors: list[str] = []
    runner, foreign = _names(docs, "runner"), _names(docs, "runner_foreign")
    ran: dict[str, set[str]] = {}
    for fp, doc in first.values():  # what each session told of its runner, whatever its record says now
        runner |= told.runner.get(fp, frozenset())
        foreign |= told.foreign.get(fp, frozenset())
        said = doc.get("ran") if isinstance(doc.get("ran"), dict) else {}
        heard_ran = [(t, d) for t, ds in told.ran.get(fp, {}).items() for d in ds]
        for nodeid, digest in [*said.items(), *heard_ran]:
            if isinstance(nodeid, str) and isinstance(digest, str):
                ran.setdefault(nodeid, set()).add(digest)
    heard_from = 0
    for fp, doc in first.values():
        if (doc.get("complete"), doc.get("worker"), doc.get("session")) != (True, False, True):
            continue
        tests, coll, errs = doc.get("tests"), doc.get("collected"), doc.get("collect_errors")
        if not isinstance(tests, dict) or not isinstance(coll, list) or not isinstance(errs, list):
            continue
        heard_from += 1
        tests = {k: v for k, v in tests.items() if isinstance(k, str) and isinstance(v, str) and v in _RANK}
        if fp in told.sessions:  # it had a channel: what it told decides, its record only worsens it
            tests = heard.judged(tests, told.tests[fp])
        for nodeid, outcome in tests.items():
            now = outcomes.get(nodeid)
            if now is None or _RANK[outcome] > _RANK[now]:
                outcomes[nodeid] = outcome
        collected.update(c for c in coll if isinstance(c, str))
        errors += [e for e in errs if isinstance(e, str)]
    if not heard_from:
        return None
    return PerTestReport(outcomes, frozenset(collected), tuple(errors), runner, foreign,
                         {t: frozenset(d) for t, d in ran.items()})


def _names(docs: Any, field: str) -> frozenset[str]:
    """A list of names every process's first record may carry (an xdist worker's too: its tests ran
    there), together."""
    return frozenset(n for doc in docs if isinstance(doc.get(field), list) for n in doc[field][:MAX_NAMED]
                     if isinstance(n, str))
