"""Mutation testing of autod's safety guards, quick enough to run in CI.

Each function and method of a guard module is changed one small step at a time (tests/mutant_sites.py
lists the changes), and the module's own unit tests that call that function run against the change.
A change no test notices is a guard the tests do not hold. It all runs in one pytest session: every
test runs once (its outcome and the guard functions it calls are recorded), then each mutant runs
in a forked copy of the session with the mutated code swapped into the live function object, so
every reference to the function (imported names, stored callbacks) runs the change and no
interpreter or pytest starts per mutant. A mutant is killed when a test fails or runs past its
deadline (a loop the change made endless).

    python tests/mutants.py                       # every guard module; prints a summary
    python tests/mutants.py --only boundary.py    # one module (a suffix is enough)
    python tests/mutants.py --out result.json     # the whole result, survivors with their lines
    python tests/mutants.py --list                # every mutant's key, nothing run
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutant_forks import Done, Job, run_all, usable_cpus  # tests/ is no package: found beside this file
from mutant_sites import Site, sites

ROOT = Path(__file__).resolve().parents[1]

# guard module -> its unit tests (tests/unit/...); a mutant runs those among them that call its function
GUARDS: dict[str, tuple[str, ...]] = {
    "autod/safety/boundary.py": ("test_boundary.py", "test_protected_files.py", "test_edits.py"),
    "autod/safety/protected.py": ("test_protected_files.py",),
    "autod/safety/saferead.py": ("test_saferead.py",),
    "autod/config/bounded.py": ("test_config_bounded.py", "test_saferead.py"),
    "autod/safety/secretforms.py": ("test_redaction.py",),
    "autod/safety/filemodes.py": ("test_filemodes.py",),
    "autod/safety/termsafe.py": ("test_termsafe.py",),
    "autod/act/edits.py": ("test_edits.py", "test_definition_edit.py"),
    "autod/act/judges.py": ("test_judges.py", "test_protected_files.py"),
    "autod/act/allowance.py": ("test_allowance.py",),
    "autod/act/worldreach.py": ("test_worldreach.py", "test_worldreach_scope.py"),
    "autod/act/selfpassing.py": ("test_selfpassing.py",),
    "autod/checks/outcome.py": ("test_outcome.py", "test_judge.py"),
    "autod/checks/renumbered.py": ("test_renumbered.py",),
    "autod/checks/seal.py": ("test_pertest.py",),
    "autod/checks/heard.py": ("test_heard.py",),
    "autod/checks/judge_path.py": ("test_judge_path.py", "test_judge_witness.py"),
    "autod/checks/judge_ran.py": ("test_judge_witness.py",),
    "autod/checks/bytecode.py": ("test_bytecode.py",),
    "autod/checks/treewalk.py": ("test_bytecode.py",),
    "autod/checks/judge_reach.py": ("test_judge_reach.py",),
    "autod/safety/safejson.py": ("test_safejson.py",),
    "autod/pyast.py": ("test_pyast_depth.py", "test_pyast.py"),
    "autod/walk.py": ("test_walk.py",),
    "autod/cycle/limits.py": ("test_limits.py",),
}
# Functions of a guard module that guard nothing, left out of the pass: (module, qualname) -> why.
NOT_GUARDS: dict[tuple[str, str], str] = {
    ("autod/act/judges.py", "rule_lines"): "the prompt's prose about the rules, for the model to read",
}
# Mutants no test can tell from the code, not run: key (as `--list` prints it) -> why it is equivalent.
_B, _S, _E = "autod/safety/boundary.py::", "autod/safety/saferead.py::", "autod/act/edits.py::"
_FM, _SF = "autod/safety/filemodes.py::private_file: ", "autod/safety/secretforms.py::"
_OPEN_FM = "os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC -> "
_OPEN_E = "_read_original: os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC -> "
_SE = "autod/checks/seal.py::"
# The pass in CI, split so that xdist runs its parts on separate workers (tests/integration/
# test_guard_mutants*.py, one part each): alone on two cores it takes ~2 minutes, but beside the suite
# one worker ran it for 460-610 s, the suite's longest path. Every guard module is in exactly one part.
PARTS: dict[str, tuple[str, ...]] = {
    "safety": ("autod/safety/boundary.py", "autod/safety/protected.py", "autod/safety/saferead.py",
               "autod/config/bounded.py", "autod/safety/secretforms.py", "autod/safety/filemodes.py",
               "autod/safety/termsafe.py", "autod/act/edits.py", "autod/act/judges.py",
               "autod/act/allowance.py", "autod/safety/safejson.py", "autod/pyast.py", "autod/walk.py",
               "autod/cycle/limits.py"),
    "checks": ("autod/checks/outcome.py", "autod/checks/renumbered.py", "autod/checks/seal.py",
               "autod/checks/heard.py", "autod/checks/judge_path.py", "autod/checks/judge_ran.py",
               "autod/checks/bytecode.py", "autod/checks/treewalk.py", "autod/checks/judge_reach.py"),
    "world": ("autod/act/worldreach.py",),
    "selfpassing": ("autod/act/selfpassing.py",),
}

EQUIVALENT: dict[str, str] = {
    "autod/checks/renumbered.py::matched: not gone or not new -> not gone and (not new)":
    "a shortcut: with either side empty no pair can form (`was in gone`, `t in new`), so reading the keys"
    " finds none either",
    "autod/checks/heard.py::outcomes: _RANK[outcome] > _RANK[now] -> _RANK[outcome] >= _RANK[now]":
    "ranks are distinct: an equal rank is the same outcome, kept either way",
    "autod/checks/heard.py::Channel.drain: 1 -> 2 #2": "any read larger than the cap tells a message over it"
    " from one at it",
    "autod/checks/judge_path.py::hooked: known[0] is not fn -> known[0] is fn": "every callable whose id is"
    " in _KNOWN is kept there, so the one found is always fn: naming it again gives the same name",
    "autod/checks/judge_path.py::hooked: 0 -> 1": "as above: the name is recomputed every time, the same",
    "autod/safety/secretforms.py::_escaped: 0xFFFF -> 65536": "U+10000 gets a five-digit `\\u` form that"
    " no JSON writes (it escapes astral characters as a surrogate pair): an alternative that never matches",
    "autod/checks/judge_ran.py::_returned: 0 <= at < _len(code) -> 0 < at < _len(code)": "offset 0 is a"
    " code's first instruction (RESUME, or RETURN_GENERATOR), never a return",
    "autod/checks/judge_ran.py::_returned: 0 -> 1": "as `0 < at`: offset 0 is never a return",
    "autod/checks/judge_ran.py::_returned: 0 <= at < _len(code) -> 0 <= at <= _len(code)": "a frame's last"
    " instruction is one of its code's: its offset is below the code's length",
    "autod/act/worldreach.py::fold: strict=True -> strict=False": "the slice's three parts and their three"
    " bounds: always the same length",
    "autod/act/selfpassing.py::_Finder.visit_Dict: strict=True -> strict=False": "a dict display's keys and"
    " values are the same length, `**` entries too (a None key beside the mapping)",
    "autod/checks/judge_path.py::moved: strict=True -> strict=False": "the labels and the owners are"
    " three each, always: zip stops at the same place either way",
    "autod/safety/secretforms.py::_escaped: n - 0x10000 -> n + 65536 #2": "the low surrogate keeps the low"
    " ten bits, and the two differ by 0x20000, a multiple of 0x400: the same surrogate",
    "autod/safety/secretforms.py::_escaped: n >= 0x80 -> n > 128": "for U+0080, the one character the two"
    " tell apart, `not c.isalnum()` holds as well (a control character): its `\\x80` form is added"
    " either way",
    "autod/safety/secretforms.py::_escaped: 0x80 -> 129": "as above: U+0080 is not alphanumeric",
    "autod/safety/secretforms.py::cut_tail: len(s) - 1 -> len(s) + 1": "the longer starts are the whole"
    " secret, which the pattern replaced before: the same starts are tried after them",
    "autod/checks/heard.py::judged: _RANK[said] > _RANK[outcome] -> _RANK[said] >= _RANK[outcome]":
    "ranks are distinct: an equal rank is the same outcome, kept either way",
    "autod/checks/judge_reach.py::install: True -> False": "no event the hook watches is raised inside it"
    " (its look at the stack raises only sys._getframe and f_code reads): the guard against re-entry"
    " changes nothing but what a broken dispatch would do",
    "autod/checks/treewalk.py::identity: follow_symlinks=False -> follow_symlinks=True": "the walk asks only"
    " about directories its own lstat found (never a link), whose stat is the same either way",
    "autod/walk.py::walk: False -> True": "DirEntry.is_dir raises only when its lstat fails, the entry gone"
    " between the listing and the look: either answer then yields a name that no longer exists",
    "autod/walk.py::remove_tree: False -> True #2": "as in walk: an entry gone since the listing; rmdir or"
    " unlink of it fails alike and is ignored",
    "autod/pyast.py::parse: 1 -> 2 #4": "a refusal for nesting names the source's start: its line and column"
    " are not a position in it (nor read by any caller)",
    "autod/pyast.py::parse: 1 -> 2 #5": "as #4",
    "autod/pyast.py::parse: 1 -> 2 #6": "as #4",
    "autod/pyast.py::parse: 1 -> 2 #7": "as #4",
    _SE + "issue: os.O_RDONLY | flags -> flags": "O_RDONLY is 0",
    _SE + "issue: os.O_NONBLOCK | os.O_CLOEXEC -> os.O_NONBLOCK": "os.open makes every descriptor"
    " non-inheritable already (PEP 446); O_CLOEXEC says so where the code is read",
    _B + "_glob_regex: j < 0 -> j <= 0": "j is -1 or an index past the `[`, so at least 1",
    _B + "_glob_regex: 0 -> 1 #2": "j is -1 or an index past the `[`, so at least 1",
    _B + "glob_match: 1 -> 2 #2": "the one more prefix, parts[:len + 1], is the whole path, already tried",
    _B + "Boundary.resolve: self._own(path) or self._own(Path(os.path.realpath(path))) -> self._own(path)"
    " and self._own(Path(os.path.realpath(path)))": "check_chain refused every symlink on the path and `..`"
    " is refused: the path is its own real path (the second look is there for a race)",
    "autod/config/bounded.py::read_upto: left > 0 -> left >= 0": "at 0 the loop reads zero bytes, gets b''"
    " and stops",
    "autod/config/bounded.py::read_upto: 1 -> 2": "two bytes past the cap read instead of one: any byte"
    " past it is refused either way",
    "autod/config/bounded.py::read_upto: 1 -> 2 #2": "the size of one read (1 or 2 MiB), not how much is"
    " read",
    "autod/config/bounded.py::read_bounded: os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC -> os.O_NONBLOCK |"
    " os.O_CLOEXEC": "O_RDONLY is 0",
    "autod/config/bounded.py::read_bounded: os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC -> os.O_RDONLY |"
    " os.O_NONBLOCK": "the descriptor is closed before the read returns: only a process started by another"
    " thread in that instant could inherit it, which no test can arrange",
    "autod/config/bounded.py::read_upto: 20 -> 21": "the size of one read (1 or 2 MiB), not how much is read",
    _S + '_kind: return "not a plain file" -> return None': "unreachable: every file type but a regular"
    " file and a symlink (which O_NOFOLLOW refuses before) is named above",
    _SF + "_base64_cores: 3 -> 4": "alignment 3 is alignment 0 four characters later: the same core",
    _SF + "_base64_cores: 8 -> 9": "the core's start -(-8k // 6) is 0, 2, 3 for k in 0..2 with 9 too",
    _SF + "_base64_cores: 6 -> 7": "the core's start -(-8k // 6) is 0, 2, 3 for k in 0..2 with 7 too",
    _SF + "pattern: len(f) >= MIN_FUZZY -> len(f) > MIN_FUZZY #2": "a key of 8 or more bytes has no"
    " base64 form shorter than 10 characters",
    _SF + "pattern: len(f) >= MIN_FUZZY -> len(f) > MIN_FUZZY #3": "a key of 8 or more bytes has no"
    " base64 form shorter than 10 characters",
    _FM + _OPEN_FM + "os.O_CREAT | os.O_EXCL | os.O_CLOEXEC": "the file is only created, never written:"
    " O_RDONLY (0) creates it the same",
    _FM + _OPEN_FM + "os.O_WRONLY | os.O_CREAT | os.O_EXCL": "the descriptor is closed on the same line:"
    " only a fork by another thread in that instant could inherit it",
    "autod/safety/termsafe.py::_shown: code < 0x100 -> code <= 256": "no character the patterns escape"
    " is U+0100 or U+0101 (C1 ends at U+009F, the next one escaped is U+061C)",
    "autod/safety/termsafe.py::_shown: 0x100 -> 257": "no character the patterns escape is U+0100 or"
    " U+0101 (C1 ends at U+009F, the next one escaped is U+061C)",
    _E + _OPEN_E + "os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC": "O_RDONLY is 0",
    _E + _OPEN_E + "os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK": "closed in the `finally` below: a"
    " process forked in that instant would inherit a workspace file every check can read anyway",
    _E + "_read_original: 1 -> 2": "one more byte read past the limit: the same verdict (longer than it)",
    "autod/act/judges.py::editable_paths: not rel or rel in out -> not rel and rel in out": "an empty"
    " path is refused by resolve (caught) and a repeat lands in the set once",
    "autod/act/judges.py::_add: not token or \"\\x00\" in token -> not token and '\\x00' in token": "an"
    " empty token is the workspace itself and a NUL makes realpath raise ValueError: both refused below",
}
SCRATCH_FREE_BYTES = 512 * 2**20  # /dev/shm holds the pass's scratch only with this much free


# -- the live functions a mutant's code is swapped into -------------------------------------------


def live_functions(modname: str, filename: str) -> tuple[dict[str, list[Any]], list[Any]]:
    """Every function object of the module by qualname (methods, wrapped and cached ones
    unwrapped), and the caches to clear once a mutant is in."""
    module = sys.modules[modname]
    found: dict[str, list[Any]] = {}
    caches: list[Any] = []
    seen: set[int] = set()

    def take(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, staticmethod | classmethod):
            take(obj.__func__)
        elif isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    take(f)
        elif isinstance(obj, type) and obj.__module__ == modname:
            for value in vars(obj).values():
                take(value)
        elif callable(obj) and hasattr(obj, "__wrapped__"):
            if hasattr(obj, "cache_clear"):
                caches.append(obj)
            take(obj.__wrapped__)
        elif isinstance(getattr(obj, "__code__", None), CodeType) and obj.__code__.co_filename == filename:
            found.setdefault(obj.__code__.co_qualname, []).append(obj)

    for value in list(vars(module).values()):
        take(value)
    return found, caches


def mutated_code(tree: ast.Module, filename: str, qualname: str, firstlineno: int) -> Any:
    """The code object of `qualname` in the (mutated) tree."""
    code = compile(tree, filename, "exec", dont_inherit=True)
    stack = [code]
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if hasattr(const, "co_qualname"):
                if const.co_qualname == qualname and const.co_firstlineno == firstlineno:
                    return const
                stack.append(const)
    raise LookupError(f"{qualname} not found in the mutated module")


# -- the pass: one pytest session, a fork per mutant ------------------------------------------------


class GuardPass:
    """A pytest plugin: runs each test once (recording what it calls), then every mutant."""

    def __init__(self, modules: list[str], *, deadline_s: float, match: str = "", jobs: int = 1,
                 tmp_root: Path | None = None) -> None:
        self.modules, self.match, self.jobs = modules, match, jobs
        self.tmp_root = tmp_root or Path(tempfile.gettempdir())
        self.deadline = time.monotonic() + deadline_s
        self.result: dict[str, Any] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: Any) -> bool:
        from _pytest.runner import runtestprotocol

        items = {item.nodeid: item for item in session.items}
        targets = {m: m.removesuffix(".py").replace("/", ".") for m in self.modules}
        codes: dict[Any, tuple[str, str]] = {}  # code object -> (module, qualname) that holds it
        lives: dict[str, tuple[dict[str, list[Any]], list[Any]]] = {}
        for module, modname in targets.items():
            __import__(modname)
            filename = str(ROOT / module)
            lives[module] = live_functions(modname, filename)
            for qualname, funcs in lives[module][0].items():
                for f in funcs:
                    for c in _nested_codes(f.__code__):
                        codes[c] = (module, qualname)
        begun = time.monotonic()
        calls, took, broken = self._baseline(runtestprotocol, items, codes)
        gc.collect()
        gc.freeze()  # what the session holds stays out of the children's collections: fewer pages copied
        out: dict[str, Any] = {"modules": {}, "baseline_failed": broken,
                               "baseline_s": round(time.monotonic() - begun, 1), "jobs": self.jobs,
                               "slowest_tests": sorted(took.items(), key=lambda kv: -kv[1])[:25]}
        tallies = {m: _Tally(m, lives[m], [n for n in items if Path(items[n].path).name in GUARDS[m]
                                           and n not in broken]) for m in self.modules}
        queue = ((tally, site) for tally in tallies.values() for site in tally.sites)

        def next_job() -> Job | None:
            for tally, site in queue:
                job = tally.job(site, self.match, self.deadline, items, calls, took)
                if job is not None:
                    return job
            return None

        run_all(next_job, lambda done: done.job.payload.record(done), jobs=self.jobs,
                runtestprotocol=runtestprotocol, tmp_factory=session.config._tmp_path_factory,
                tmp_root=self.tmp_root)
        for module, tally in tallies.items():
            out["modules"][module] = tally.result()
        listed = {k for k in EQUIVALENT if k.split("::")[0] in self.modules}
        out["stale_equivalents"] = sorted(listed - {s.key for m in self.modules for s in _sites(m)})
        self.result = out
        return True

    def _baseline(self, runtestprotocol: Any, items: dict[str, Any], codes: dict[Any, tuple[str, str]]
                  ) -> tuple[dict[str, set[tuple[str, str]]], dict[str, float], list[str]]:
        calls: dict[str, set[tuple[str, str]]] = {}
        took: dict[str, float] = {}
        broken: list[str] = []
        for nodeid, item in items.items():
            called: set[tuple[str, str]] = set()

            def tracer(frame: Any, event: str, arg: Any, called: set[tuple[str, str]] = called) -> None:
                hit = codes.get(frame.f_code)
                if hit is not None:
                    called.add(hit)

            start = time.monotonic()
            sys.settrace(tracer)
            import threading

            threading.settrace(tracer)
            try:
                reports = runtestprotocol(item, log=False, nextitem=None)
            finally:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type]
            took[nodeid] = time.monotonic() - start
            calls[nodeid] = called
            if any(r.failed for r in reports) or not any(r.when == "call" and r.passed for r in reports):
                broken.append(nodeid)
        return calls, took, broken


class _Tally:
    """One guard module's mutants: which to run (with which tests) and what became of each."""

    def __init__(self, module: str, live: tuple[dict[str, list[Any]], list[Any]], own: list[str]) -> None:
        self.module, self.own = module, own
        self.tree, self.sites = sites(ROOT, module, _skipped(module))
        self.filename = str(ROOT / module)
        self.funcs, self.caches = live
        self.counts: dict[str, Any] = {"mutants": len(self.sites), "killed": 0, "survived": 0, "timeout": 0,
                                       "no_tests": 0, "not_applied": 0, "broken": 0, "equivalent": 0}
        self.survivors: list[dict[str, Any]] = []
        self.killers: dict[str, list[str]] = {}  # function -> the tests that killed its mutants, last first
        self.timings: list[tuple[float, str, str]] = []
        self.killed_by: dict[str, str] = {}
        self.started: float | None = None
        self.ended = 0.0

    def job(self, site: Site, match: str, deadline: float, items: dict[str, Any],
            calls: dict[str, set[tuple[str, str]]], took: dict[str, float]) -> Job | None:
        """The mutant to run for this site, or None (counted here: not matched, equivalent, past the
        deadline, not applied, no tests)."""
        if match not in site.key:
            self.counts["mutants"] -= 1
            return None
        if site.key in EQUIVALENT:
            self.counts["equivalent"] += 1
            return None
        if time.monotonic() > deadline:
            self.counts["not_run"] = self.counts.get("not_run", 0) + 1
            return None
        targets = self.funcs.get(site.function)
        if not targets:
            self.counts["not_applied"] += 1
            self.survivors.append(_shown(site, "not_applied"))
            return None
        tests = [n for n in self.own if (self.module, site.function) in calls[n]]
        if not tests:
            self.counts["no_tests"] += 1
            self.survivors.append(_shown(site, "no_tests"))
            return None
        first = self.killers.get(site.function, [])
        ordered = [n for n in first if n in tests] + sorted((n for n in tests if n not in first),
                                                            key=lambda n: took[n])
        budget = 1.0 + 3 * sum(took[n] for n in tests)  # past it: a loop the mutant made endless
        if self.started is None:
            self.started = time.monotonic()

        def make() -> None:
            site.apply()
            ast.fix_missing_locations(self.tree)
            new = mutated_code(self.tree, self.filename, site.function, targets[0].__code__.co_firstlineno)
            for f in targets:
                f.__code__ = new
            for c in self.caches:
                c.cache_clear()

        # each test gets a deadline of its own; `budget`, for them all, is the backstop
        runs = [(items[n], 0.5 + 3 * took[n]) for n in ordered]
        return Job(site.key, make, runs, budget, payload=_Ran(self, site))

    def record(self, site: Site, done: Done) -> None:
        self.counts[done.status] += 1
        self.timings.append((round(done.seconds, 3), done.status, site.key))
        if done.killer is not None:
            first = self.killers.get(site.function, [])
            self.killed_by[site.key] = done.killer
            self.killers[site.function] = [done.killer, *(k for k in first if k != done.killer)][:5]
        if done.status in ("survived", "broken"):  # broken: the mutant could not be made (a bug here)
            why = {"why": done.detail} if done.detail else {}
            self.survivors.append({**_shown(site, done.status), **why})
        self.ended = time.monotonic()

    def result(self) -> dict[str, Any]:
        elapsed = round(self.ended - self.started, 1) if self.started is not None else 0.0
        return {**self.counts, "elapsed_s": max(elapsed, 0.0), "survivors": self.survivors,
                "slowest": sorted(self.timings, reverse=True)[:15], "killed_by": self.killed_by}


class _Ran:
    """What a finished job reports to: its module's tally, and its site."""

    def __init__(self, tally: _Tally, site: Site) -> None:
        self.tally, self.site = tally, site

    def record(self, done: Done) -> None:
        self.tally.record(self.site, done)


def _skipped(module: str) -> set[str]:
    return {f for m, f in NOT_GUARDS if m == module}


def _sites(module: str) -> list[Site]:
    return sites(ROOT, module, _skipped(module))[1]


def _nested_codes(code: Any) -> Iterator[Any]:
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _nested_codes(const)


def _shown(site: Site, status: str) -> dict[str, Any]:
    return {"key": site.key, "line": site.line, "status": status}


def scratch_dir() -> str | None:
    """Where the tests' temporary directories go: /dev/shm when it has room (thousands of mutants
    make and remove them; on a disk that is seconds of waiting), else the usual temporary directory."""
    shm = "/dev/shm"
    try:
        roomy = shutil.disk_usage(shm).free >= SCRATCH_FREE_BYTES
    except OSError:
        return None
    return shm if roomy and os.access(shm, os.W_OK | os.X_OK) else None


def run(modules: list[str], *, deadline_s: float = 600.0, match: str = "", jobs: int = 0) -> dict[str, Any]:
    """The pass over these guard modules (the mutants whose key holds `match`), in this process: it
    runs pytest, then forks per mutant, `jobs` at once (0: one per usable CPU)."""
    files = sorted({f"tests/unit/{t}" for m in modules for t in GUARDS[m]})
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autod-mutants-", dir=scratch_dir()) as tmp:
        plugin = GuardPass(modules, deadline_s=deadline_s, match=match, jobs=jobs or usable_cpus(),
                           tmp_root=Path(tmp))
        args = [*files, "-q", "-n", "0", "-p", "no:cacheprovider", f"--basetemp={tmp}/t", "--no-header"]
        old = os.getcwd()
        os.chdir(ROOT)
        try:
            rc = pytest.main(args, plugins=[plugin])
        finally:
            os.chdir(old)
    out = plugin.result or {"error": f"pytest exit code {rc}"}
    out["elapsed_s"] = round(time.monotonic() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", metavar="MODULE", help="guard modules to run (a suffix is enough)")
    ap.add_argument("--out", metavar="FILE", help="write the whole result (JSON) here")
    ap.add_argument("--deadline-s", type=float, default=600.0, help="stop starting mutants after this long")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--match", default="", metavar="TEXT", help="only the mutants whose key holds TEXT")
    ap.add_argument("--jobs", type=int, default=0, metavar="N", help="mutants at once (0: a usable CPU each)")
    args = ap.parse_args(argv)
    modules = list(GUARDS)
    if args.only:
        modules = [m for m in GUARDS if any(m == o or m.endswith("/" + o.lstrip("/")) for o in args.only)]
        if not modules:
            ap.error(f"no such guard module: {' '.join(args.only)}")
    if args.list:
        for m in modules:
            for s in _sites(m):
                print(s.key)
        return 0
    result = run(modules, deadline_s=args.deadline_s, match=args.match, jobs=args.jobs)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for module, r in result.get("modules", {}).items():
        shown = ("mutants", "killed", "timeout", "equivalent", "survived", "no_tests", "broken")
        counts = " ".join(f"{k}={r[k]}" for k in shown)
        print(f"{module}: {counts} ({r['elapsed_s']} s)")
        for s in r["survivors"]:
            why = f": {s['why']}" if "why" in s else ""
            print(f"  {s['status']}: {s['key']}  (line {s['line']}){why}")
    for key in result.get("stale_equivalents", []):
        print(f"  listed as equivalent but no longer a mutant: {key}")
    print(f"elapsed {result.get('elapsed_s')} s", result.get("error", ""))
    return 0 if "error" not in result else 2


if __name__ == "__main__":
    raise SystemExit(main())
