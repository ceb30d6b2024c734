"""`os.walk` and `shutil.rmtree` without recursion: a tree as deep as the file system allows is
walked, and removed.

On Python 3.11 `os.walk` recurses once per directory level, so a workspace holding a directory chain a
thousand levels deep (one `mkdir -p` away) ended the walk, and the cycle or the watcher that walked it,
with `RecursionError`. `walk` yields what `os.walk(top)` does, top-down, in the same order, and the
caller may prune `dirs` in place as with `os.walk`; a directory is entered from a stack, links to
directories are listed but never entered, and a directory that cannot be read is passed over. A name
that is not UTF-8 is neither listed nor entered (`autod.fsnames`: outside what autod reads).
`remove_tree` is `shutil.rmtree(path, ignore_errors=True)` the same way (which recurses too, and whose
`RecursionError` is no OSError it ignores): for trees a check could write into (the mirror, a check's
private and result directories).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from autod import fsnames

__all__ = ["entries", "remove_tree", "walk"]


def entries(directory: str) -> list[os.DirEntry[str]] | None:
    """The entries of `directory`, read at once; None when it cannot be read (gone, not permitted,
    its name past PATH_MAX): every walk here passes such a directory over."""
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError:
        return None


def walk(top: str | os.PathLike[str]) -> Iterator[tuple[str, list[str], list[str]]]:
    """(dirpath, dirnames, filenames) for `top` and every directory under it, top-down."""
    stack = [os.fspath(top)]
    while stack:
        here = stack.pop()
        listed = entries(here)
        if listed is None:
            continue
        dirs, files = [], []
        for entry in listed:
            if not fsnames.is_utf8(entry.name):
                fsnames.left_out(entry.path, "walk")
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield here, dirs, files
        for name in reversed(dirs):  # pruned by the caller, as with os.walk; the first name comes next
            path = os.path.join(here, name)
            if not os.path.islink(path):
                stack.append(path)


def remove_tree(top: str | os.PathLike[str]) -> None:
    """Remove `top` and everything under it, never following a link; what cannot be removed (a name
    past PATH_MAX, a directory without permission) is left, silently."""
    top = os.fspath(top)
    try:
        if not os.path.isdir(top) or os.path.islink(top):
            os.unlink(top)
            return
    except OSError:
        return
    stack = [(top, False)]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            continue
        stack.append((path, True))
        for entry in entries(path) or ():
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append((entry.path, False))
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
