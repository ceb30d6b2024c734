"""The one read of autod's own files (its config, a credential file): a regular file, a bounded size,
never a wait.

`Path.read_text` on a config replaced by a FIFO blocked a reload forever (SIGHUP never answered, a
systemd reload waiting out its timeout); one replaced by a link to `/dev/zero` took the daemon from
242 MB to 3.1 GB in 12 s, `autod config check` to 4.2 GB (a probe of the seventh session). A link is
followed (a deployed config often is one); what it reaches must be a regular file under the cap.
The workspace's own files have their read in `autod.safety.saferead`, which follows no link.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["CONFIG_CAP", "CREDENTIAL_CAP", "read_bounded", "read_upto"]

CONFIG_CAP = 4 << 20  # bytes of a config file (the example config is ~20 KB)
CREDENTIAL_CAP = 64 << 10  # bytes of a credential file (a key is one line)


def read_bounded(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at `path`, at most `cap`. OSError for anything else (a FIFO, a
    device, a directory, a file over the cap), its `strerror` saying which, never the content."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > cap:
            raise OSError(errno.EFBIG, f"over {cap} bytes", str(path))
        data = read_upto(fd, cap)
        if len(data) > cap:
            raise OSError(errno.EFBIG, f"over {cap} bytes", str(path))
        return data
    finally:
        os.close(fd)


def read_upto(fd: int, cap: int) -> bytes:
    """At most `cap + 1` bytes from `fd`: one byte past the cap tells a file that grew while it was read
    (autod.safety.saferead reads the workspace's files with it too)."""
    chunks: list[bytes] = []
    left = cap + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
