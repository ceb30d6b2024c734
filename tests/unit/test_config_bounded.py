"""autod's own files are read once, bounded and without a wait: a config (or a credential file) that is
a FIFO, a device, a directory or too large is a config error naming the file, at once. A FIFO had hung
a SIGHUP reload forever; a link to /dev/zero took the daemon to 3.1 GB (a probe of the seventh session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autod.config.bounded import CONFIG_CAP, CREDENTIAL_CAP, read_bounded
from autod.config.credfile import read_credential
from autod.config.settings import ConfigError, load_config


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _big(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _link(path: Path, to: str) -> Path:
    path.symlink_to(to)
    return path


KINDS = {
    "a FIFO": _fifo,
    "a link to /dev/zero": lambda p: _link(p, "/dev/zero"),
    "a directory": lambda p: (p.mkdir(), p)[1],
    "a file over the cap": lambda p: _big(p, CONFIG_CAP + 1),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_config_that_is_no_regular_file_under_the_cap_is_a_config_error_at_once(tmp_path, kind):
    path = KINDS[kind](tmp_path / "autod.yaml")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(str(path))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_config_check_exits_78_at_once(tmp_path, kind):
    path = KINDS[kind](tmp_path / "autod.yaml")
    done = subprocess.run([sys.executable, "-m", "autod.cli.main", "config", "check", "-c", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 78, done.stderr[-500:]
    assert "Traceback" not in done.stderr


def test_a_link_to_a_regular_file_is_read_and_so_is_a_file_at_the_cap(tmp_path):
    (tmp_path / "real.yaml").write_bytes(b"x" * 10)
    assert read_bounded(_link(tmp_path / "link.yaml", str(tmp_path / "real.yaml")), 10) == b"x" * 10
    with pytest.raises(OSError, match="over 9 bytes"):
        read_bounded(tmp_path / "real.yaml", 9)


@pytest.mark.parametrize("kind", ["a FIFO", "a link to /dev/zero"])
def test_a_credential_file_that_is_no_regular_file_is_not_read(tmp_path, kind):
    assert read_credential(KINDS[kind](tmp_path / "key")) is None  # nothing read, no wait


def test_a_credential_file_over_its_cap_is_refused(tmp_path):
    with pytest.raises(OSError, match="over"):
        read_credential(_big(tmp_path / "key", CREDENTIAL_CAP + 1))
