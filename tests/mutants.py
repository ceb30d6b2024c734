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
import contextlib
import gc
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutant_sites import Site, sites  # tests/ is no package: found beside this file

ROOT = Path(__file__).resolve().parents[1]

# guard module -> its unit tests (tests/unit/...); a mutant runs those among them that call its function
GUARDS: dict[str, tuple[str, ...]] = {
    "autod/safety/boundary.py": ("test_boundary.py", "test_protected_files.py", "test_edits.py"),
    "autod/safety/protected.py": ("test_protected_files.py",),
    "autod/safety/saferead.py": ("test_saferead.py",),
    "autod/safety/secretforms.py": ("test_redaction.py",),
    "autod/safety/filemodes.py": ("test_filemodes.py",),
    "autod/safety/termsafe.py": ("test_termsafe.py",),
    "autod/act/edits.py": ("test_edits.py", "test_definition_edit.py"),
    "autod/act/judges.py": ("test_judges.py", "test_protected_files.py"),
    "autod/act/allowance.py": ("test_allowance.py",),
    "autod/checks/outcome.py": ("test_outcome.py", "test_judge.py"),
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
EQUIVALENT: dict[str, str] = {
    _B + "_glob_regex: j < 0 -> j <= 0": "j is -1 or an index past the `[`, so at least 1",
    _B + "_glob_regex: 0 -> 1 #2": "j is -1 or an index past the `[`, so at least 1",
    _B + "glob_match: 1 -> 2 #2": "the one more prefix, parts[:len + 1], is the whole path, already tried",
    _B + "Boundary.resolve: self._own(path) or self._own(Path(os.path.realpath(path))) -> self._own(path)"
    " and self._own(Path(os.path.realpath(path)))": "check_chain refused every symlink on the path and `..`"
    " is refused: the path is its own real path (the second look is there for a race)",
    _S + "read_untrusted: left > 0 -> left >= 0": "at 0 the loop reads zero bytes, gets b'' and stops",
    _S + "read_untrusted: 1 -> 2 #2": "the size of one read (1 or 2 MiB), not how much is read",
    _S + "read_untrusted: 20 -> 21": "the size of one read (1 or 2 MiB), not how much is read",
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
EXIT_SURVIVED, EXIT_KILLED, EXIT_BROKEN, EXIT_TIMEOUT = 0, 1, 3, 4


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
        elif hasattr(obj, "__code__") and obj.__code__.co_filename == filename:
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

    def __init__(self, modules: list[str], *, deadline_s: float, match: str = "") -> None:
        self.modules, self.match = modules, match
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
                               "baseline_s": round(time.monotonic() - begun, 1),
                               "slowest_tests": sorted(took.items(), key=lambda kv: -kv[1])[:25]}
        for module in self.modules:
            own = [n for n in items if Path(items[n].path).name in GUARDS[module] and n not in broken]
            out["modules"][module] = self._module(
                runtestprotocol, module, targets[module], lives[module], items, own, calls, took
            )
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

    def _module(self, runtestprotocol: Any, module: str, modname: str,
                live: tuple[dict[str, list[Any]], list[Any]], items: dict[str, Any], own: list[str],
                calls: dict[str, set[tuple[str, str]]], took: dict[str, float]) -> dict[str, Any]:
        tree, found = sites(ROOT, module, _skipped(module))
        filename = str(ROOT / module)
        funcs, caches = live
        counts = {"mutants": len(found), "killed": 0, "survived": 0, "timeout": 0, "no_tests": 0,
                  "not_applied": 0, "broken": 0, "equivalent": 0}
        survivors: list[dict[str, Any]] = []
        killers: dict[str, list[str]] = {}
        timings: list[tuple[float, str, str]] = []
        killed_by: dict[str, str] = {}
        started = time.monotonic()
        for site in found:
            if self.match not in site.key:
                counts["mutants"] -= 1
                continue
            if site.key in EQUIVALENT:
                counts["equivalent"] += 1
                continue
            if time.monotonic() > self.deadline:
                counts["not_run"] = counts.get("not_run", 0) + 1
                continue
            targets = funcs.get(site.function)
            if not targets:
                counts["not_applied"] += 1
                survivors.append(_shown(site, "not_applied"))
                continue
            tests = [n for n in own if (module, site.function) in calls[n]]
            if not tests:
                counts["no_tests"] += 1
                survivors.append(_shown(site, "no_tests"))
                continue
            first = killers.get(site.function, [])
            ordered = [n for n in first if n in tests] + sorted(
                (n for n in tests if n not in first), key=lambda n: took[n]
            )
            budget = 1.0 + 3 * sum(took[n] for n in tests)  # past it: a loop the mutant made endless
            t0 = time.monotonic()
            # each test gets a deadline of its own; `budget`, for them all, is the backstop
            runs = [(items[n], 0.5 + 3 * took[n]) for n in ordered]
            status, killer = self._run_one(
                runtestprotocol, tree, site, filename, targets, caches, runs, budget
            )
            counts[status] += 1
            timings.append((round(time.monotonic() - t0, 3), status, site.key))
            if killer is not None:
                killed_by[site.key] = killer
                killers[site.function] = [killer, *(k for k in first if k != killer)][:5]
            if status in ("survived", "broken"):  # broken: the mutant could not be made (a bug here)
                survivors.append(_shown(site, status))
        counts["elapsed_s"] = round(time.monotonic() - started, 1)
        return {**counts, "survivors": survivors, "slowest": sorted(timings, reverse=True)[:15],
                "killed_by": killed_by}

    def _run_one(self, runtestprotocol: Any, tree: ast.Module, site: Site, filename: str,
                 targets: list[Any], caches: list[Any], tests: list[tuple[Any, float]], budget: float
                 ) -> tuple[str, str | None]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the mutant: its own process, so nothing it does reaches the next one
            os.close(read)
            code = EXIT_BROKEN
            try:
                os.setpgid(0, 0)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                site.apply()
                ast.fix_missing_locations(tree)
                new = mutated_code(tree, filename, site.function, targets[0].__code__.co_firstlineno)
                for f in targets:
                    f.__code__ = new
                for c in caches:
                    c.cache_clear()
                signal.signal(signal.SIGALRM, _Deadline.handler)
                code = _tests_of(runtestprotocol, tests, write)
            finally:  # anything that escaped the tests leaves EXIT_BROKEN: reported, never a survivor
                os._exit(code)
        os.close(write)
        end = time.monotonic() + budget
        status = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(raw)
                status = {EXIT_SURVIVED: "survived", EXIT_KILLED: "killed", EXIT_TIMEOUT: "timeout"}.get(
                    code, "broken"
                )
            elif time.monotonic() > end:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = "timeout"
            else:
                time.sleep(0.002)
        with os.fdopen(read, "rb") as f:
            killer = f.read().decode() or None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # what the tests started and left behind
        return status, killer


def _skipped(module: str) -> set[str]:
    return {f for m, f in NOT_GUARDS if m == module}


def _sites(module: str) -> list[Site]:
    return sites(ROOT, module, _skipped(module))[1]


def _tests_of(runtestprotocol: Any, tests: list[tuple[Any, float]], write: int) -> int:
    """Run the tests in the mutant's process: its exit code, and the killing test's id on `write`."""
    for item, limit in tests:
        try:
            _Deadline.arm(limit)
            try:
                reports = runtestprotocol(item, log=False, nextitem=None)
            finally:
                _Deadline.disarm()
        except BaseException:  # past the deadline outside the test's own code (setup, pytest itself)
            if _Deadline.fired:
                return EXIT_TIMEOUT
            raise
        if any(r.failed for r in reports):
            os.write(write, item.nodeid.encode())
            return EXIT_KILLED
    return EXIT_SURVIVED


def _nested_codes(code: Any) -> Iterator[Any]:
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from _nested_codes(const)


class PastDeadline(BaseException):
    """Raised in a mutant's test by its deadline's alarm; no `except Exception` of the code swallows it."""


class _Deadline:
    """One test's alarm. Disarmed before the timer is stopped, so an alarm already on its way when the
    test ends raises nothing outside the test; `fired` tells a deadline that Python turned into another
    error (raised in a `__set_name__` of a class pytest's report imports, it is a RuntimeError)."""

    armed = fired = False

    @classmethod
    def handler(cls, signum: int, frame: Any) -> None:
        if cls.armed:
            cls.armed, cls.fired = False, True
            raise PastDeadline("the mutant ran past the test's deadline")

    @classmethod
    def arm(cls, seconds: float) -> None:
        cls.armed, cls.fired = True, False
        signal.setitimer(signal.ITIMER_REAL, seconds)

    @classmethod
    def disarm(cls) -> None:
        cls.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _shown(site: Site, status: str) -> dict[str, Any]:
    return {"key": site.key, "line": site.line, "status": status}


def run(modules: list[str], *, deadline_s: float = 600.0, match: str = "") -> dict[str, Any]:
    """The pass over these guard modules (the mutants whose key holds `match`), in this process: it
    runs pytest, then forks per mutant."""
    files = sorted({f"tests/unit/{t}" for m in modules for t in GUARDS[m]})
    plugin = GuardPass(modules, deadline_s=deadline_s, match=match)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autod-mutants-") as tmp:
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
    result = run(modules, deadline_s=args.deadline_s, match=args.match)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for module, r in result.get("modules", {}).items():
        shown = ("mutants", "killed", "timeout", "equivalent", "survived", "no_tests", "broken")
        counts = " ".join(f"{k}={r[k]}" for k in shown)
        print(f"{module}: {counts} ({r['elapsed_s']} s)")
        for s in r["survivors"]:
            print(f"  {s['status']}: {s['key']}  (line {s['line']})")
    for key in result.get("stale_equivalents", []):
        print(f"  listed as equivalent but no longer a mutant: {key}")
    print(f"elapsed {result.get('elapsed_s')} s", result.get("error", ""))
    return 0 if "error" not in result else 2


if __name__ == "__main__":
    raise SystemExit(main())
