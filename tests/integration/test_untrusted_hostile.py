"""What a check leaves behind never wedges the daemon: hostile workspaces through `autod run`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from daemon import FIX_PLAN, Autod, base_config, write_config

pytestmark = pytest.mark.slow

# the project's conftest: when autod re-runs the failing tests under its line recorder, the result
# file is swapped for a named pipe (an open() for reading waits for a writer that never comes)
FIFO_CONFTEST = '''\
import os, sys


def pytest_unconfigure(config):
    for arg in sys.argv:
        if arg.startswith("--autod-spectrum="):
            result = os.path.join(arg.split("=", 1)[1], "spectrum.json")
            if os.path.exists(result):
                os.unlink(result)
            os.mkfifo(result)
'''


def test_a_fifo_for_the_recorders_result_neither_wedges_the_cycle_nor_the_stop(
    tmp_path: Path, calc_repo: Path, scripted_llm
) -> None:
    (calc_repo / "conftest.py").write_text(FIFO_CONFTEST)
    scripted_llm.push_plan(FIX_PLAN)
    cfg = base_config(calc_repo, ranked=True, state_dir=str(tmp_path / "state"))  # the recorder re-run
    cfg["llm"]["base_url"] = scripted_llm.base_url
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl")
    d.start()
    try:
        (r,) = d.wait_reflections(1, timeout=150)
        assert r["status"] == "fixed", r
        refused = [x for x in d.records() if x.get("event") == "localize.result_refused"]
        assert refused and "named pipe" in refused[0]["reason"]
        assert scripted_llm.requests  # the cycle went on to plan
    finally:
        try:
            code = d.stop(timeout=60)  # SIGTERM: the process is gone well within systemd's stop timeout
        except subprocess.TimeoutExpired:
            d.kill()
            raise
    assert code == 0
    assert any(x.get("event") == "daemon.stopped" for x in d.records())


def test_source_nested_past_any_reader_deep_directories_and_long_names_are_no_internal_error(
    tmp_path: Path, calc_repo: Path, scripted_llm
) -> None:
    """A workspace holding what Python's own readers break on: a module of one 100,000-term sum, one of
    100,000 unary minuses, a directory chain deeper than the recursion limit, a file name of 250 bytes.
    Before the one AST parse and the one walk (autod.pyast, autod.walk) each ended every cycle as an
    internal error (RecursionError, MemoryError, OSError from the mirror); now the bug is fixed."""
    import os

    from autod.walk import remove_tree

    (calc_repo / "src" / "deep_sum.py").write_text("x = " + "+".join(["a"] * 100_000) + "\n")
    (calc_repo / "src" / "deep_minus.py").write_text("x = " + "-" * 100_000 + "1\n")
    (calc_repo / "src" / ("n" * 247 + ".py")).write_text("LONG = 1\n")
    fd = os.open(calc_repo / "src", os.O_RDONLY)
    for _ in range(1_200):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    scripted_llm.push_plan(FIX_PLAN)
    cfg = base_config(calc_repo, ranked=True, state_dir=str(tmp_path / "state"))
    cfg["llm"]["base_url"] = scripted_llm.base_url
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl")
    d.start()
    try:
        (r,) = d.wait_reflections(1, timeout=150)
        assert r["status"] == "fixed", r
    finally:
        assert d.stop(timeout=60) == 0
        remove_tree(calc_repo / "src" / "d")  # pytest's own cleanup of tmp_path recurses
        remove_tree(tmp_path / "state")
    assert not any(x.get("event") == "cycle.crashed" for x in d.records())
