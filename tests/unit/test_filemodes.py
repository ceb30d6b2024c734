"""autod's own files are private; the umask autod was started with is kept for the workspace."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod.safety import filemodes
from autod.safety.filemodes import private_dir, private_file, private_files, workspace_umask


@pytest.fixture
def umask_022() -> Iterator[None]:
    """A permissive login umask, as a shell would have; restored afterwards."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_private_dir_and_its_missing_parents_are_made_0700(tmp_path: Path, umask_022: None) -> None:
    assert private_dir(tmp_path / "state") == tmp_path / "state"
    assert mode(tmp_path / "state") == 0o700
    with private_files():
        assert private_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o700


def test_an_existing_dir_is_left_as_the_operator_made_it(tmp_path: Path, umask_022: None) -> None:
    shared = tmp_path / "state"
    shared.mkdir(mode=0o750)
    shared.chmod(0o750)
    assert private_dir(shared) == shared
    assert mode(shared) == 0o750


def test_a_private_file_is_created_empty_0600_in_a_private_dir(tmp_path: Path, umask_022: None) -> None:
    path = tmp_path / "state" / "queue.db"
    assert private_file(path) == path
    assert path.read_bytes() == b"" and mode(path) == 0o600 and mode(path.parent) == 0o700


def test_an_existing_file_keeps_its_content_and_mode(tmp_path: Path, umask_022: None) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"rows")
    path.chmod(0o640)
    assert private_file(path) == path
    assert path.read_bytes() == b"rows" and mode(path) == 0o640


def test_the_started_umask_is_kept_for_the_workspace_through_nested_commands(umask_022: None) -> None:
    assert workspace_umask() == 0o022  # outside any command: the process's own, read without changing it
    with private_files():
        assert os.umask(0o077) == 0o077  # the command runs private
        with private_files():
            assert workspace_umask() == 0o022  # not the private one the outer command set
        assert workspace_umask() == 0o022
    assert os.umask(0o022) == 0o022  # restored


def test_the_umask_is_read_from_proc_and_guessed_only_without_it(
    umask_022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.umask(0o027)
    assert workspace_umask() == 0o027
    assert os.umask(0o027) == 0o027  # reading it did not change it

    def no_proc(*args: object, **kwargs: object) -> object:
        raise OSError("no /proc here")

    monkeypatch.setattr(filemodes, "open", no_proc, raising=False)
    assert workspace_umask() == 0o022


def test_a_dangling_symlink_planted_at_the_path_creates_nothing_where_it_points(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    link = tmp_path / "state" / "state.db"
    link.parent.mkdir()
    link.symlink_to(target)
    private_file(link)
    assert not target.exists() and link.is_symlink()
