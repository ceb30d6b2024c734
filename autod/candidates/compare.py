"""Comparing a candidate's changes with the code as it was and with the other candidates: the same
code (only quotes, spacing or comments differ), the same change (a key by AST), a symptom patch (a
constant inlined as a literal, autod.act.inlined; a definition bypassed, autod.act.bypassed)."""

from __future__ import annotations

import ast
import contextlib
import hashlib
from pathlib import Path, PurePosixPath

from autod import pyast
from autod.act.bypassed import bypassed_calls
from autod.act.edits import FileChange
from autod.act.inlined import functions, inlined_constants
from autod.safety.saferead import read_untrusted

MAX_READ_BYTES = 2_000_000  # a module read to compare a rewrite with
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


def symptom_patch(changes: list[FileChange]) -> str | None:
    """Why a candidate may patch the symptom, or None: a constant replaced by a literal
    (autod.act.inlined), or a workspace definition the function no longer calls, doing its work
    itself, while the definition stays as it was (autod.act.bypassed)."""
    texts: list[tuple[FileChange, str, str]] = []
    for ch in changes:
        if ch.old is None or not ch.rel.endswith(".py"):
            continue
        try:
            texts.append((ch, ch.old.decode("utf-8"), ch.new.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    rewritten = _rewritten(texts)
    for ch, old, new in texts:
        root = ch.path.parents[len(PurePosixPath(ch.rel).parts) - 1]

        def read(rel: str, root: Path = root) -> str | None:
            target = root / rel
            try:
                if ".." in PurePosixPath(rel).parts:
                    return None
                return read_untrusted(target, cap=MAX_READ_BYTES).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                return None

        found = inlined_constants(ch.rel, old, new, read)
        if found:
            return found[0].reason()
        bypassed = bypassed_calls(ch.rel, old, new, read, lambda path, name: (path, name) in rewritten)
        if bypassed:
            return bypassed[0].reason()
    return None


def _rewritten(texts: list[tuple[FileChange, str, str]]) -> set[tuple[str, str]]:
    """(path, last name) of each function or method the candidate changes."""
    out: set[tuple[str, str]] = set()
    for ch, old, new in texts:
        try:
            before, after = functions(pyast.parse(old)), functions(pyast.parse(new))
        except (SyntaxError, ValueError):
            continue
        for q, fn in after.items():
            if q not in before or ast.dump(before[q]) != ast.dump(fn):
                out.add((ch.rel, q.rsplit(".", 1)[-1]))
    return out


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
