"""The one follower (autod.sources.follower) behind logtail and `autod logs -f`."""

from __future__ import annotations

import os
from pathlib import Path

from autod.sources.follower import TRUNCATED_MARK, FileFollower, Position


def test_lines_written_to_the_old_file_after_a_rename_are_read_before_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_bytes(b"one\n")
    reasons: list[str] = []
    follower = FileFollower(log, from_start=True, saved=None, on_reopen=reasons.append)
    assert follower.read() == b"one\n"
    assert follower.read() == b""
    log.rename(tmp_path / "build.log.1")
    with open(tmp_path / "build.log.1", "ab") as old:  # the writer has not noticed the rename yet
        old.write(b"two\n")
    log.write_bytes(b"three\n")
    assert follower.read() == b"two\n"
    assert reasons == []
    assert follower.read() == b"three\n"
    assert reasons == ["rotated or re-created"]
    follower.close()


def test_a_truncated_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_bytes(b"a long first line\n")
    reasons: list[str] = []
    follower = FileFollower(log, from_start=True, saved=None, on_reopen=reasons.append)
    assert follower.read() == b"a long first line\n"
    log.write_bytes(b"new\n")  # copytruncate, then a write
    assert follower.read() == b"new\n" and reasons == ["truncated"]
    assert follower.position is not None and follower.position.offset == 4
    follower.close()


def test_the_saved_position_holds_only_for_the_same_file_still_that_long(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_bytes(b"old\nnew\n")
    st = log.stat()
    same = FileFollower(log, from_start=False, saved=Position(st.st_dev, st.st_ino, 4))
    assert same.read() == b"new\n"
    other = FileFollower(log, from_start=False, saved=Position(st.st_dev, st.st_ino + 1, 4))
    assert other.read() == b""  # another file: an old log starts at its end
    past = FileFollower(log, from_start=True, saved=Position(st.st_dev, st.st_ino, 99))
    assert past.read() == b"old\nnew\n"  # shorter than the position: read from the start
    for f in (same, other, past):
        f.close()


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "build.log"
    os.mkfifo(fifo)
    follower = FileFollower(fifo, from_start=True, saved=None)
    assert follower.read() == b"" and follower.position is None


def test_a_line_past_the_limit_is_cut_and_marked_and_the_next_is_whole(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_bytes(b"x" * 100 + b"\nshort\n")
    follower = FileFollower(log, from_start=True, saved=None, max_line=50, keep_of_long_line=10)
    assert follower.read() == b"x" * 10 + TRUNCATED_MARK + b"\nshort\n"
    follower.close()
