"""Dynamic ranking: re-run the failing tests' files under autod's line recorder, rank functions by Ochiai.

The re-run is the operator's configured check with autod's extra arguments (`-p autod_spectrum ...`),
run through the same `run_check` (sandbox, environment, timeout): never a command from a model.
The recorder writes into a directory autod owns outside the workspace; what it writes is untrusted
(project code ran) and is read with size caps and type checks.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod.linebreaks import lines_of
from autod.localize.frames import is_test_path, parse_test_ids
from autod.localize.index import Index, build_index
from autod.safety import safejson
from autod.safety.saferead import UnsafeRead, read_untrusted
from autod.walk import remove_tree

if TYPE_CHECKING:
    from autod.config.settings import Settings
    from autod.safety.boundary import Boundary

log = structlog.get_logger("autod.localize")


class RerunEnv(Protocol):
    """What a re-run needs of the mode's environment (autod.modes.ModeEnv): the check runner."""

    settings: Settings
    run_check: Callable[..., Awaitable[Any]]

    @property
    def boundary(self) -> Boundary: ...

PLUGIN = "autod_spectrum"
MAX_RESULT_BYTES = 64 * 2**20
MAX_FILES = 20  # test files re-run, at most
# the recorder; every test of the files runs (a `-x` in the check would stop at the first failure);
# the run leaves pytest's cache alone, so `--lf` in a focus still means the check's last failures
PLUGIN_ARGS = ("-p", PLUGIN, "--maxfail=1000000", "-p", "no:cacheprovider")


def ochiai(failed: int, passed: int, total_failed: int) -> float:
    """Ochiai suspiciousness: ef / sqrt(nf * (ef + ep))."""
    if failed <= 0 or total_failed <= 0:
        return 0.0
    return failed / math.sqrt(total_failed * (failed + passed))


def test_files(boundary: Boundary, output: str) -> list[str]:
    """The failing tests' files, validated: `path::name` shapes whose path is a readable test file."""
    files: list[str] = []
    for t in parse_test_ids(output):
        rel = boundary.readable(t.path)
        if rel is None or rel != t.path.removeprefix("./") or not is_test_path(rel):
            continue
        if (boundary.workspace / rel).is_file() and rel not in files:
            files.append(rel)
    return files[:MAX_FILES]


class Spectrum(dict[tuple[str, str], float]):
    """(path, qualname) -> suspiciousness (a function's most suspicious line), with the lines behind it.

    A dict, so a caller that wants a function's score reads it as one; `lines` keeps, per workspace file,
    how many failing and passing tests ran each line, which is what shows a long definition as the part
    the failing tests ran and marks the lines only they ran (autod.localize.slices).
    """

    def __init__(self, functions: dict[tuple[str, str], float] | None = None,
                 lines: dict[str, dict[int, tuple[int, int]]] | None = None, total_failed: int = 0) -> None:
        super().__init__(functions or {})
        self.lines: dict[str, dict[int, tuple[int, int]]] = lines or {}  # path -> line -> (failed, passed)
        self.total_failed = total_failed

    def line_score(self, path: str, line: int) -> float:
        ef, ep = self.lines.get(path, {}).get(line, (0, 0))
        return ochiai(ef, ep, self.total_failed)

    def failing_ran(self, path: str, start: int, end: int) -> dict[int, float]:
        """The lines in [start, end] the failing tests ran, each with its Ochiai score."""
        here = self.lines.get(path, {})
        return {ln: ochiai(ef, ep, self.total_failed) for ln, (ef, ep) in sorted(here.items())
                if start <= ln <= end and ef}

    def failing_only(self, path: str, start: int, end: int) -> list[int]:
        """The lines in [start, end] that failing tests ran and no passing test did."""
        here = self.lines.get(path, {})
        return [ln for ln, (ef, ep) in sorted(here.items()) if start <= ln <= end and ef and not ep]


def scores(index: Index, boundary: Boundary, doc: Any) -> Spectrum:
    """(path, qualname) -> suspiciousness, from the recorder's result document (untrusted: checked here).

    Ochiai is computed per line, over the failing tests and the passing tests of the same files, and a
    function scores its most suspicious line: the branch only the failing tests take stands out even
    in a function every test runs (a function-level count would rank it with all the others). The
    per-line counts of workspace files stay with the result (`Spectrum.lines`).
    """
    tests = doc.get("tests") if isinstance(doc, dict) else None
    if not isinstance(tests, dict):
        return Spectrum()
    rel_of: dict[str, str | None] = {}
    owner: dict[tuple[str, int], tuple[str, str] | None] = {}
    counts: dict[tuple[str, int], list[int]] = {}
    total_failed = 0
    for entry in list(tests.values())[:5000]:
        if not isinstance(entry, dict) or not isinstance(entry.get("lines"), dict):
            continue
        failed = entry.get("failed") is True
        total_failed += failed
        for path, lines in entry["lines"].items():
            if not isinstance(path, str) or not isinstance(lines, list):
                continue
            if path not in rel_of:
                rel_of[path] = boundary.readable(path)
            rel = rel_of[path]
            mod = index.modules.get(rel) if rel else None
            if mod is None:
                continue
            for line in lines[:100_000]:
                if not isinstance(line, int) or isinstance(line, bool):
                    continue
                key = (mod.path, line)
                if key not in owner:
                    d = mod.enclosing(line)
                    owner[key] = (d.path, d.qualname) if d is not None and d.kind == "function" else None
                counts.setdefault(key, [0, 0])[0 if failed else 1] += 1
    out: dict[tuple[str, str], float] = {}
    by_file: dict[str, dict[int, tuple[int, int]]] = {}
    for key, (ef, ep) in counts.items():
        by_file.setdefault(key[0], {})[key[1]] = (ef, ep)
        func = owner[key]
        if ef and func is not None:
            out[func] = max(out.get(func, 0.0), ochiai(ef, ep, total_failed))
    return Spectrum(out, by_file, total_failed)


async def spectrum_for(env: RerunEnv, check_name: str, output: str) -> Spectrum | None:
    """Re-run the failing tests' files under the recorder via the check; None when that cannot be done."""
    boundary = env.boundary
    files = await asyncio.to_thread(test_files, boundary, output)
    if not files:
        log.info("localize.coverage_unavailable", check=check_name,
                 reason="the output names no failing test file (pytest's `FAILED path::test` lines)")
        return None
    out = Path(tempfile.mkdtemp(prefix="autod-spectrum-"))
    try:
        plugin = resources.files("autod.localize").joinpath("spectrum_plugin.py").read_bytes()
        (out / f"{PLUGIN}.py").write_bytes(plugin)
        (out / "select.json").write_text(json.dumps({"files": files}), encoding="utf-8")
        check = env.settings.checks[check_name]
        path = check.env.get("PYTHONPATH", "")  # a check's environment is its own `env:`, not autod's
        result = await env.run_check(
            check_name,
            extra_args=[*PLUGIN_ARGS, f"--autod-spectrum={out}"],
            extra_env={"PYTHONPATH": os.pathsep.join(p for p in (str(out), path) if p)},
            output_dir=out,
        )
        doc = await asyncio.to_thread(_load, out / "spectrum.json")
        if doc is None:
            # pytest could not load the recorder (an old pytest, `python -I`, a plugin conflict...) or
            # the run never finished: ranked without it, saying so
            tail = " ".join(lines_of(result.output.strip())[-1:])[:200]
            log.warning("localize.coverage_unavailable", check=check_name, exit_code=result.exit_code,
                        reason="the line recorder wrote no result; ranking by the static index only",
                        output=tail)
            return None
        cfg = env.settings.localize
        index = await asyncio.to_thread(
            build_index,
            boundary,
            max_files=cfg.index_max_files,
            max_bytes=cfg.index_max_mb * 2**20,
            max_summary=cfg.index_max_summary_mb * 2**20,
            timeout_s=cfg.index_timeout_s,
        )
        found = await asyncio.to_thread(scores, index, boundary, doc)
        log.info("localize.spectrum_ranked", check=check_name, files=len(files), functions=len(found))
        return found
    finally:
        await asyncio.to_thread(remove_tree, out)


def _load(path: Path) -> Mapping[str, Any] | None:
    """The recorder's result, or None: read as untrusted (a FIFO, a symlink or an oversize file is
    refused without blocking), then parsed."""
    try:
        doc = safejson.loads(read_untrusted(path, cap=MAX_RESULT_BYTES))
    except UnsafeRead as exc:
        log.warning("localize.result_refused", path=path.name, reason=exc.strerror)
        return None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_pytest(run: str) -> bool:
    """Whether a check's command runs pytest (`pytest ...`, `py.test`, `python -m pytest ...`)."""
    import shlex

    try:
        argv = shlex.split(run)
    except ValueError:
        return False
    if not argv:
        return False
    head = os.path.basename(argv[0])
    if head in ("pytest", "py.test"):
        return True
    return head.startswith("python") and "-m" in argv and argv[argv.index("-m") + 1 :][:1] == ["pytest"]
