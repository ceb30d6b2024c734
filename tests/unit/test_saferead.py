"""The one safe read: a FIFO, a symlink, a device or an oversized file is refused, never waited on."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.safety.saferead import UnsafeRead, read_untrusted, read_untrusted_text


def test_a_regular_file_is_read_whole(tmp_path):
    p = tmp_path / "r.json"
    p.write_bytes(b'{"a": 1}')
    assert read_untrusted(p, cap=100) == b'{"a": 1}'


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    p = tmp_path / "r.json"
    os.mkfifo(p)
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            read_untrusted(p, cap=100)
        except BaseException as exc:
            errors.append(exc)
        done.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    # no writer ever opens the pipe: a blocking open would never return
    assert done.wait(30), "the read blocked on a FIFO"
    assert isinstance(errors[0], UnsafeRead) and "named pipe" in str(errors[0])


def test_a_symlink_is_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("key")
    link = tmp_path / "r.json"
    link.symlink_to(secret)
    with pytest.raises(UnsafeRead, match="symlink"):
        read_untrusted(link, cap=100)


def test_a_device_is_refused(tmp_path):
    link = "/dev/zero"
    with pytest.raises(UnsafeRead, match="device"):
        read_untrusted(link, cap=100)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(UnsafeRead):
        read_untrusted(tmp_path, cap=100)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=0, max_value=4096), cap=st.integers(min_value=0, max_value=4096))
def test_the_cap_holds_for_every_size(tmp_path_factory, size, cap):
    p = tmp_path_factory.mktemp("cap") / "f"
    p.write_bytes(b"x" * size)
    if size <= cap:
        assert read_untrusted(p, cap=cap) == b"x" * size
    else:
        with pytest.raises(UnsafeRead, match="cap"):
            read_untrusted(p, cap=cap)


def test_text_is_decoded_with_replacement(tmp_path):
    p = tmp_path / "t"
    p.write_bytes(b"ok \xff")
    assert read_untrusted_text(p, cap=10) == "ok \ufffd"


def test_a_file_longer_than_its_size_said_is_refused_after_one_byte_past_the_cap(monkeypatch):
    # /proc files say size 0 and hold more: the same as a file that grew while it was read. The read
    # stops one byte past the cap, whatever the chunks the kernel hands out.
    import autod.safety.saferead as saferead

    real_read = os.read
    taken: list[int] = []

    def small_reads(fd: int, n: int) -> bytes:
        data = real_read(fd, min(n, 5))  # 51 = 10 reads of 5 and one of 1
        taken.append(len(data))
        return data

    monkeypatch.setattr(saferead.os, "read", small_reads)
    with pytest.raises(UnsafeRead, match="grew past the 50-byte cap"):
        read_untrusted("/proc/self/status", cap=50)
    assert sum(taken) == 51


def test_the_head_of_a_file_is_read_by_the_same_rules(tmp_path):
    from autod.safety.saferead import read_untrusted_head

    p = tmp_path / "big.log"
    p.write_bytes(b"0123456789" * 10)
    assert read_untrusted_head(p, 12) == b"012345678901"
    (tmp_path / "link").symlink_to(p)
    with pytest.raises(UnsafeRead):
        read_untrusted_head(tmp_path / "link", 12)


def test_exists_regular_is_a_plain_file_never_a_link_or_a_directory(tmp_path):
    from autod.safety.saferead import exists_regular

    (tmp_path / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert exists_regular(tmp_path / "f") is True
    assert not exists_regular(tmp_path / "link") and not exists_regular(tmp_path)
    assert not exists_regular(tmp_path / "missing")
