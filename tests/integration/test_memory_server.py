"""Two daemons sharing one Chroma server: a lesson learnt by one is recalled by the other."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from autod.config import MemoryConfig
from autod.memory import Tier
from autod.memory.embed import LocalEmbedder
from autod.memory.store import ChromaMemory

pytestmark = pytest.mark.slow

LESSON = "When test_config_loader fails with KeyError name, add a default for name in load_config"
FAILURE = "FAILED tests/test_config.py::test_config_loader - KeyError: name"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        pytest.skip(f"chroma console script not found at {chroma}")
    port = _free_port()
    log = (tmp_path / "chroma.log").open("wb")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    server = subprocess.Popen(
        [str(chroma), "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(tmp_path / "chroma")],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30  # hang guard, not a performance bound
        while True:
            if server.poll() is not None:
                tail = (tmp_path / "chroma.log").read_text()[-2000:]
                pytest.fail(f"chroma exited with {server.returncode}: {tail}")
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("chroma server did not answer its heartbeat")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_lesson_added_by_one_daemon_is_recalled_by_another(chroma_url: str, tmp_path: Path) -> None:
    cfg = MemoryConfig(url=chroma_url)
    embedder = LocalEmbedder()

    async def main() -> None:
        a = await ChromaMemory.open(cfg, tmp_path / "daemon-a", embedder=embedder)
        b = await ChromaMemory.open(cfg, tmp_path / "daemon-b", embedder=embedder)
        try:
            lesson_id = await a.add_lesson(LESSON, {"fingerprint": "fp1", "mode": "auto-debug"}, success=True)
            await a.observe("watcher saw src/config.py change", {"kind": "files_changed"})
            await a.flush()
            hits = await b.recall(FAILURE, budget_tokens=500)
            assert hits[0].id == lesson_id and hits[0].tier is Tier.N2
            assert hits[0].text == LESSON
            # The second daemon's merge lands on the same lesson, counted once more.
            assert await b.add_lesson(LESSON, {"fingerprint": "fp1"}, success=True) == lesson_id
            stats = await a.stats()
            assert stats["mode"] == "server" and stats["disk_bytes"] is None
            assert stats["tiers"]["n2"]["count"] == 1 and stats["tiers"]["n0"]["count"] == 1
            [merged] = await a.search(LESSON, tier=Tier.N2, k=1)
            assert (merged.metadata["uses"], merged.metadata["successes"]) == (2, 2)
        finally:
            await a.close()
            await b.close()
        assert not (tmp_path / "daemon-a" / "memory").exists()  # server mode keeps nothing locally

    asyncio.run(main())
