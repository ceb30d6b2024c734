"""What a fixing candidate may create: an allowance, not the complement of a deny list.

A fix changes the project's existing source. A new file is allowed only where nothing can import or
read it in place of something else:
- a Python module inside an existing regular package (a directory that already has `__init__.py`),
  so it is only ever imported by its qualified name (`pkg.helpers`) and never shadows a top-level
  module, whatever directory pytest or `python -m` puts first on the import path; and not one of the
  names Python or the test runner give a meaning to (`__init__.py`, `__main__.py`, `conftest.py`);
- a source file of another language beside existing source of the same kind (a `.go` file in a
  directory of `.go` files), not hidden (no leading dot) and not named like configuration.
Anything else (a top-level module, configuration, metadata such as `*.dist-info/`, a `.pth`, a data
file) is refused with this reason, or with `allow_judge_edits` held for `autod approve`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

__all__ = ["new_file_refusal"]

_RUNNER_NAMES = frozenset({"__init__.py", "__main__.py", "conftest.py", "sitecustomize.py",
                           "usercustomize.py"})
_PYTHON = (".py", ".pyw")
_SOURCE = frozenset({".go", ".rs", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".rb", ".java", ".kt",
                     ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".php", ".scala", ".ex", ".exs"})
_CONFIG_WORDS = ("config", "conf", "setup", "settings", "rc", "plugin")


def new_file_refusal(rel: str, workspace: Path) -> str | None:
    """Why a candidate may not create the file `rel` (workspace-relative, normalised), or None."""
    p = PurePosixPath(rel)
    parent = workspace / p.parent
    name, suffix = p.name, p.suffix.lower()
    if any(part.startswith(".") for part in p.parts):
        return _refused(rel, "a hidden file or directory")
    if any(part.endswith((".dist-info", ".egg-info", ".data")) for part in p.parts[:-1]):
        return _refused(rel, "distribution metadata")
    if suffix in _PYTHON:
        if name in _RUNNER_NAMES:
            return _refused(rel, f"{name} is read by Python or the test runner by its name")
        if p.parent == PurePosixPath(".") or not _is_file(parent / "__init__.py"):
            return _refused(rel, "a module outside an existing package could be imported in place of"
                            " another module of the same name")
        return None
    if suffix in _SOURCE:
        stem = p.stem.lower()
        if any(w in stem for w in _CONFIG_WORDS):
            return _refused(rel, "named like configuration")
        if not _has_sibling(parent, suffix, name):
            return _refused(rel, f"no {suffix} source is beside it")
        return None
    return _refused(rel, "not a source file of the project (configuration, metadata and data files are"
                    " never created by a fix)")


def _refused(rel: str, why: str) -> str:
    return (f"{rel}: a fix may not create this file ({why}); a candidate changes the project's existing"
            " source, and may add a module only inside an existing package - fix the code where it is")


def _is_file(path: Path) -> bool:
    return os.path.isfile(path) and not os.path.islink(path)  # both answer False for what they cannot stat


def _has_sibling(parent: Path, suffix: str, name: str) -> bool:
    try:
        with os.scandir(parent) as it:
            return any(e.name != name and e.name.lower().endswith(suffix) and e.is_file(follow_symlinks=False)
                       for e in it)
    except OSError:
        return False
