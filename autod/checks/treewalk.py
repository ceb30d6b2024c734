"""One walk of a tree's files for the checks: breadth by a stack, no link ever followed, which
directories to enter decided by the caller, and a cap on the entries read."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator

__all__ = ["TooLarge", "files"]


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
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        read += len(entries)
        if read > max_entries:
            raise TooLarge(d)
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if enter(e):
                    stack.append(e.path)
            else:
                yield e, st
