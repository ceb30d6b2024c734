"""A big module is parsed in a child process, so the daemon keeps the GIL while it is read.

`ast.parse` is one C call that never lets go of the GIL: "off the event loop" in a worker thread is
not enough. A generated module of 995,000 one-token statements (2 MB, under the read cap) held it for
about 4 s, and `autod status` took 6.4 s to answer while the index was built (lab notebook, "Probing the
host side again"). Its cost follows the module's tokens, not its bytes, and a byte cap low enough to
bound it would leave real modules unread (generated API clients, big single-file libraries). So a
module over `ASIDE_BYTES` is parsed by `python -P -m autod.localize.aside`: the text goes in on stdin
as JSON, the index's summary of it (`Module`, a few kB) comes back as JSON, and the thread that waits
holds no GIL. The child only parses, never imports or runs the module; `-P` keeps the workspace's
files (a `json.py`) off its import path. A child that fails, or runs past `TIMEOUT_S`, gives a module
that could not be parsed, as a syntax error does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from autod.localize.modules import Definition, Module, parse_module

__all__ = ["ASIDE_BYTES", "TIMEOUT_S", "from_json", "parse_aside", "to_json"]

ASIDE_BYTES = 256 * 1024  # under it a parse holds the GIL ~0.5 s at worst (one-token lines)
TIMEOUT_S = 60.0
_MAX_OUTPUT = 16 * 2**20  # bytes of a summary: the child sends none longer, the daemon reads none


def parse_aside(rel: str, text: str, names: tuple[str, ...]) -> Module:
    """`parse_module(rel, text, names)`, computed by a child process. Blocking (the caller is already
    off the event loop); the GIL is free while it waits."""
    payload = json.dumps({"rel": rel, "text": text, "names": list(names)}).encode("ascii")
    failed = Module(rel, names, "", n_lines=text.count("\n") + 1)
    try:
        done = subprocess.run([sys.executable, "-P", "-m", "autod.localize.aside"], input=payload,
                              capture_output=True, timeout=TIMEOUT_S, check=False, env=_env())
    except subprocess.TimeoutExpired:
        failed.error = f"parse took over {TIMEOUT_S:g}s"
        return failed
    except OSError as exc:
        failed.error = f"parse failed to start: {type(exc).__name__}"
        return failed
    if done.returncode != 0 or len(done.stdout) > _MAX_OUTPUT:
        failed.error = f"parse failed (exit {done.returncode})"
        return failed
    try:
        return from_json(json.loads(done.stdout))
    except (ValueError, TypeError, KeyError):
        failed.error = "parse failed (unreadable summary)"
        return failed


def _env() -> dict[str, str]:
    """The daemon's environment with its own autod first on the import path: the child must parse with
    the daemon's code, not another autod the interpreter would find (a source checkout run from
    `sys.path`, an older install)."""
    root = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + rest if rest else "")}


def to_json(mod: Module) -> dict[str, Any]:
    return asdict(mod)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def from_json(data: dict[str, Any]) -> Module:
    """The `Module` `to_json` gave: lists back to the tuples its fields hold."""
    names = {f.name for f in fields(Definition)}
    defs = {q: Definition(**{k: _tuples(v) for k, v in d.items() if k in names})
            for q, d in data["defs"].items()}
    return Module(data["path"], _tuples(data["names"]), data["package"], dict(data["imports"]),
                  _tuples(data["stars"]), defs, int(data["n_lines"]), data["error"])


def _main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    mod = parse_module(request["rel"], request["text"], tuple(request["names"]))
    out = json.dumps(to_json(mod))
    if len(out) > _MAX_OUTPUT:  # a summary can be ~65 times its source (long call chains): not sent
        return 3
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
