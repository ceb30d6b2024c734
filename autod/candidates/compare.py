"""Comparing a candidate's changes with the code as it was and with the other candidates: the same
code (only quotes, spacing or comments differ), the same change (a key by AST), a constant inlined
as a literal (a symptom patch, autod.act.inlined)."""

from __future__ import annotations

import ast
import contextlib
import hashlib
from pathlib import Path, PurePosixPath

from autod import pyast
from autod.act.edits import FileChange
from autod.act.inlined import inlined_constants

SAME_CODE = "the edits change only quotes, spacing or comments: the code does exactly what it did"


def same_code(change: FileChange) -> bool:
    """Whether `change` leaves a Python file's code as it was (the same AST: quotes, spacing and
    comments aside). A new file, a non-Python file or one that does not parse is a change."""
    if change.old is None or not change.rel.endswith(".py"):
        return False
    try:
        before, after = (pyast.parse(b.decode("utf-8")) for b in (change.old, change.new))
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return False
    return ast.dump(before) == ast.dump(after)


def inlined_constant(changes: list[FileChange]) -> str | None:
    """Why a candidate is a symptom patch (a constant replaced by a literal), or None."""
    for ch in changes:
        if ch.old is None or not ch.rel.endswith(".py"):
            continue
        root = ch.path.parents[len(PurePosixPath(ch.rel).parts) - 1]

        def read(rel: str, root: Path = root) -> str | None:
            target = root / rel
            try:
                if ".." in PurePosixPath(rel).parts or not target.is_file():
                    return None
                return target.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None

        try:
            old, new = ch.old.decode("utf-8"), ch.new.decode("utf-8")
        except UnicodeDecodeError:
            continue
        found = inlined_constants(ch.rel, old, new, read)
        if found:
            return found[0].reason()
    return None


def change_key(changes: list[FileChange]) -> str:
    """The same key for two candidates that produce the same files (Python compared by AST)."""
    h = hashlib.sha256()
    for c in sorted(changes, key=lambda c: c.rel):
        h.update(c.rel.encode() + b"\0")
        body = c.new
        if c.rel.endswith(".py"):
            with contextlib.suppress(SyntaxError, ValueError, UnicodeDecodeError):
                body = ast.dump(pyast.parse(c.new.decode("utf-8"))).encode()
        h.update(hashlib.sha256(body).digest())
    return h.hexdigest()
