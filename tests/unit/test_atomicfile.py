"""The one atomic write (autod.atomicfile) and the files autod writes with it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from autod.atomicfile import atomic_write, write_new_file
from autod.memory.identity import instance_id
from autod.modes.plan import write_report_file
from autod.safety.boundary import TMP_MARKER
from autod.sources.follower import Position
from autod.sources.logtail import _load_position, _save_position


def test_a_write_replaces_the_file_whole_with_its_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_bytes(b"old")
    atomic_write(target, b"new", 0o640)
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_symlink_at_the_target_is_replaced_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    link = tmp_path / "f.txt"
    link.symlink_to(outside)
    atomic_write(link, b"mine", 0o600)
    assert outside.read_bytes() == b"keep"
    assert not link.is_symlink() and link.read_bytes() == b"mine"


def test_a_failure_before_the_rename_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_bytes(b"old")

    def refuse(path: Path, data: bytes | None) -> None:
        assert any(TMP_MARKER in p.name for p in tmp_path.iterdir())  # written beside it, not yet renamed
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        atomic_write(target, b"new", 0o600, on_write=refuse)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_new_file_is_never_an_existing_one_or_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "there").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    for name in ("there", "link"):
        with pytest.raises(FileExistsError):
            write_new_file(tmp_path / name, b"y", 0o600)
    assert not (tmp_path / "nowhere").exists()


def test_the_logtail_position_is_private_and_never_written_through_a_planted_link(tmp_path: Path) -> None:
    state = tmp_path / "state" / "logtail" / "abc.json"
    state.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (state.parent / "abc.tmp").symlink_to(victim)  # where the old code wrote its temp file
    _save_position(state, Position(1, 2, 3), tmp_path / "build.log")
    assert _load_position(state) == Position(1, 2, 3)
    assert stat.S_IMODE(state.stat().st_mode) == 0o600 and victim.read_text() == "keep"


def test_a_report_is_written_whole_with_the_mode_asked(tmp_path: Path) -> None:
    report = tmp_path / "reports" / "r.md"
    write_report_file(report, b"# r\n")
    assert report.read_bytes() == b"# r\n" and stat.S_IMODE(report.stat().st_mode) == 0o600
    write_report_file(report, b"# r2\n", 0o644)
    assert report.read_bytes() == b"# r2\n" and stat.S_IMODE(report.stat().st_mode) == 0o644


def test_the_instance_id_is_made_once_private_and_kept(tmp_path: Path) -> None:
    first = instance_id(tmp_path / "state")
    assert instance_id(tmp_path / "state") == first
    path = tmp_path / "state" / "instance-id"
    assert path.read_text() == f"{first}\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("damaged\n")
    second = instance_id(tmp_path / "state")
    assert second != first and path.read_text() == f"{second}\n"
    assert sorted(os.listdir(path.parent)) == ["instance-id"]
