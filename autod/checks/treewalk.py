"""One walk of a tree's files for the checks: breadth by a stack, no link ever followed, which
directories to enter decided by the caller, and a cap on the entries read. A directory is told by its
identity (device, inode), never by resolving its path: `os.path.realpath` costs a look at every
component, so on a chain of directories a check made a thousand deep, one per directory walked made
the walks around every check run take minutes."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator

from autod import walk

__all__ = ["TooLarge", "files", "identities", "identity"]


def identities(paths: Iterable[os.PathLike[str] | str]) -> set[tuple[int, int]]:
    """The (device, inode) of each directory in `paths` that exists (a link: of what it names)."""
    out = set()
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.add((st.st_dev, st.st_ino))
    return out


def identity(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    """An entry's own (device, inode), from the stat the walk already made; None if it is gone."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class TooLarge(Exception):
    """The tree has more entries than the walk may read."""


def files(root: str, enter: Callable[[os.DirEntry[str]], bool], max_entries: int,
          ) -> Iterator[tuple[os.DirEntry[str], os.stat_result]]:
    """Every entry under `root` that is not a directory, with its own stat (a link's, not its
    target's), in the directories `enter` accepts; an entry that cannot be read is passed over.
    Raises TooLarge past `max_entries` entries read."""
    stack, read = [root], 0
    while stack:
        d = stack.pop()
        listed = walk.entries(d)
        if listed is None:
            continue
        read += len(listed)
        if read > max_entries:
            raise TooLarge(d)
        for e in listed:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if enter(e):
                    stack.append(e.path)
            else:
                yield e, st
