"""Two instances laid out as `autod@.service` lays them out: a check in one sees none of the other's
files (nor its own instance's logs, rotated ones included). Through `autod run`, real bubblewrap."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon import Autod, base_config, git, write_config

pytestmark = pytest.mark.slow

PROBE = '''\
import json, pathlib, sys
seen = {}
for p in json.loads(pathlib.Path("paths.json").read_text()):
    try:
        seen[p] = pathlib.Path(p).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        seen[p] = None
pathlib.Path("report.json").write_text(json.dumps({"python": sys.executable, "seen": seen}))
'''


@pytest.fixture
def host_root() -> Iterator[Path]:
    """A directory outside /tmp (a check gets a private /tmp, which would hide any layout made there)."""
    root = Path(__file__).resolve().parents[2] / f".fleet-{uuid.uuid4().hex[:12]}"
    root.mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def instance(root: Path, name: str, *, running: bool) -> dict[str, Path]:
    """One instance's directories the way the template unit makes them (StateDirectory=autod/%i...)."""
    dirs = {k: root / "var" / k / "autod" / name for k in ("lib", "log", "cache")}
    dirs["run"] = root / "run" / "autod" / name
    for d in dirs.values():
        d.mkdir(parents=True)
    secret = f"SECRET-OF-{name}"
    state = dirs["lib"]
    files = ("state.db", "queue.db", "transcripts/abcdef12.jsonl", "memory/chroma.sqlite3")
    for rel in files if running else ():
        (state / rel).parent.mkdir(parents=True, exist_ok=True)
        (state / rel).write_text(f"{secret} {rel}\n")
    for rel in ("autod.jsonl", "autod.jsonl.1", "autod.jsonl.2.gz"):
        (dirs["log"] / rel).write_text(f"{secret} {rel}\n")
    (dirs["cache"] / "pip.cache").write_text(f"{secret} cache\n")
    (dirs["run"] / "control.sock").write_text(f"{secret} runtime\n")
    return dirs


def test_a_check_sees_no_file_of_a_neighbour_instance_nor_its_own_rotated_logs(host_root: Path) -> None:
    tmp_path = host_root
    a, b = instance(tmp_path, "alpha", running=False), instance(tmp_path, "beta", running=True)
    repo = tmp_path / "srv" / "alpha"
    repo.mkdir(parents=True)
    (repo / "probe.py").write_text(PROBE)
    targets = [p for d in b.values() for p in d.rglob("*") if p.is_file()]
    targets += [a["log"] / "autod.jsonl.1", a["log"] / "autod.jsonl.2.gz", a["lib"] / "state.db"]
    (repo / "paths.json").write_text(json.dumps([str(p) for p in targets]))
    (repo / ".gitignore").write_text("report.json\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    cfg = base_config(repo)
    cfg["checks"] = {
        "sandbox": "bwrap",  # no silent fallback: a broken bwrap fails this test
        "probe": {"run": f"{sys.executable} probe.py", "timeout_s": 60, "when": ["start"]},
    }
    cfg["state_dir"] = str(a["lib"])
    cfg["logging"] = {"level": "debug", "file": str(a["log"] / "autod.jsonl")}
    config = write_config(tmp_path / "alpha.yaml", cfg)
    env = {"STATE_DIRECTORY": str(a["lib"]), "LOGS_DIRECTORY": str(a["log"]),
           "CACHE_DIRECTORY": str(a["cache"]), "RUNTIME_DIRECTORY": str(a["run"])}
    d = Autod(config, log_file=a["log"] / "autod.jsonl", env=env, args=("--once",))
    try:
        d.start()
        assert d.proc is not None
        assert d.proc.wait(180) == 0, d.stderr()[-3000:]
    finally:
        d.kill()
    report = json.loads((repo / "report.json").read_text())  # the check ran: its verdict is real
    readable = {p: text for p, text in report["seen"].items() if text is not None}
    assert len(report["seen"]) == len(targets) >= 10
    assert readable == {}, f"a check in alpha read: {sorted(readable)}"
