"""An AST index of the workspace's Python files: whole definitions, imports, and what each function uses.

Each module is parsed once per (path, mtime, size) (`autod.localize.modules`; a big one by a child
process, `autod.localize.aside`) and kept in a process-wide cache; building is blocking (call it off
the event loop) and bounded in files, source bytes, summary bytes and time. Every read goes through
the Boundary, so the index never holds a file a prompt may not show.

Memory is bounded by what the summaries hold (`modules.weight`), not by the source: ordinary code
summarises to about twice its size, but a file of many one-line definitions to 15-35 times: 64 MB of
such source, within the source cap, would have held ~2 GB, near the service's MemoryMax with its checks.
An index stops at `max_summary` bytes (`localize.index_max_summary_mb`; incomplete, saying so), and
the cache kept across cycles drops its least recently used modules past `CACHE_BYTES` or that cap.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from autod.localize import aside
from autod.localize.modules import Definition, Module, parse_module, weight
from autod.paths import GENERATED_DIRS, NOT_SOURCE_DIRS
from autod.safety.boundary import Boundary
from autod.walk import walk

__all__ = ["Definition", "Index", "Module", "build_index", "module_names"]

SKIP_DIRS = NOT_SOURCE_DIRS | GENERATED_DIRS
CACHE_MODULES = 20_000  # parsed modules kept across cycles ...
CACHE_BYTES = 256 * 2**20  # ... and their summaries' estimated bytes (modules.weight), or an index's cap
MAX_SUMMARY = 256 * 2**20  # one index's summaries, estimated (`localize.index_max_summary_mb`)


@dataclass
class Index:
    root: Path
    modules: dict[str, Module] = field(default_factory=dict)  # rel path -> module
    by_name: dict[str, list[str]] = field(default_factory=dict)  # dotted module name -> rel paths
    complete: bool = True
    why_incomplete: str = ""

    def add(self, mod: Module) -> None:
        self.modules[mod.path] = mod
        for name in mod.names:
            self.by_name.setdefault(name, []).append(mod.path)

    def module_named(self, dotted: str) -> Module | None:
        paths = self.by_name.get(dotted)
        return self.modules[paths[0]] if paths else None

    def get(self, path: str, qualname: str) -> Definition | None:
        mod = self.modules.get(path)
        return mod.defs.get(qualname) if mod else None

    def find(self, qualname: str) -> list[Definition]:
        """Definitions with this qualname (or ending in `.qualname`) in any module, path order."""
        out = []
        for path in sorted(self.modules):
            for q, d in self.modules[path].defs.items():
                if q == qualname or q.endswith("." + qualname):
                    out.append(d)
        return out


# -- building ---------------------------------------------------------------------------------

_cache: OrderedDict[tuple[str, str], tuple[int, int, Module, int]] = OrderedDict()
_cache_lock = threading.Lock()
_cache_bytes = 0  # the weights of what _cache holds


def build_index(
    boundary: Boundary,
    *,
    first: Iterable[str] = (),
    max_files: int = 5000,
    max_bytes: int = 64 * 2**20,
    max_summary: int | None = None,
    timeout_s: float = 20.0,
) -> Index:
    """Index the workspace's Python files (those in `first` before any other), within `max_bytes` of
    source and `max_summary` estimated bytes of summaries (None: MAX_SUMMARY). Blocking."""
    root = boundary.workspace
    index = Index(root)
    deadline = time.monotonic() + timeout_s
    limit = MAX_SUMMARY if max_summary is None else max_summary
    used = held = 0
    seen: set[str] = set()
    for rel in _ordered(root, boundary, first):
        if rel in seen:
            continue
        seen.add(rel)
        if len(index.modules) >= max_files:
            index.complete, index.why_incomplete = False, f"more than {max_files} Python files"
            break
        if time.monotonic() > deadline:
            index.complete, index.why_incomplete = False, f"indexing took over {timeout_s:g}s"
            break
        mod, size, w = _module(root, boundary, rel, max(CACHE_BYTES, limit))
        if mod is None:
            continue
        used += size
        held += w
        if used > max_bytes:
            index.complete, index.why_incomplete = False, f"more than {max_bytes // 2**20} MB of source"
            break
        if held > limit:
            index.complete = False
            index.why_incomplete = f"its summaries past {limit / 2**20:g} MB (many small definitions)"
            break
        index.add(mod)
    return index


def _ordered(root: Path, boundary: Boundary, first: Iterable[str]) -> Iterable[str]:
    for rel in first:
        if rel.endswith(".py"):
            yield rel
    state = boundary.state_dir
    for dirpath, dirs, files in walk(root):
        here = Path(dirpath)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS
            and not d.startswith(".")
            and (here / d) != state
            and not (here / d / "pyvenv.cfg").exists()
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield (here / name).relative_to(root).as_posix()


def _module(root: Path, boundary: Boundary, rel: str, keep: int) -> tuple[Module | None, int, int]:
    """(the module, its source's bytes, its summary's estimated bytes); None when it cannot be read. The
    cache keeps `keep` estimated bytes at most (as much as an index may hold, at least CACHE_BYTES)."""
    global _cache_bytes
    path = root / rel
    try:
        st = os.lstat(path)
    except OSError:
        return None, 0, 0
    key = (str(root), rel)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            _cache.move_to_end(key)
            return hit[2], st.st_size, hit[3]
    if boundary.readable(rel) != rel:
        return None, 0, 0
    text = boundary.read_text(rel)
    if text is None:
        return None, 0, 0
    names = module_names(root, rel)
    big = len(text) > aside.ASIDE_BYTES  # its parse would hold the GIL for seconds: a child reads it
    mod = aside.parse_aside(rel, text, names) if big else parse_module(rel, text, names)
    w = weight(mod)
    with _cache_lock:
        old = _cache.pop(key, None)
        if old is not None:
            _cache_bytes -= old[3]
        _cache[key] = (st.st_mtime_ns, st.st_size, mod, w)
        _cache_bytes += w
        while len(_cache) > 1 and (len(_cache) > CACHE_MODULES or _cache_bytes > keep):
            _cache_bytes -= _cache.popitem(last=False)[1][3]
    return mod, st.st_size, w


def module_names(root: Path, rel: str) -> tuple[str, ...]:
    """Dotted names a file is imported as: by its package chain first, then by its path."""
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return ()
    # the package chain: parent directories that hold an __init__.py
    k = len(parts) - 1
    while k > 0 and (root.joinpath(*parts[:k]) / "__init__.py").exists():
        k -= 1
    names = [".".join(parts[k:])] if k < len(parts) else []
    for i in range(len(parts)):
        cand = ".".join(parts[i:])
        if cand and cand not in names:
            names.append(cand)
    return tuple(names)


