"""The embedded store has one owner process: a second opener gets MemoryLocked with the owner's pid."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autod.config.settings import MemoryConfig
from autod.memory.lock import MemoryLocked, OwnerLock
from autod.memory.store import ChromaMemory

# Opens the store (read-only or not, from argv), says so, and holds it until stdin closes.
OWNER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from autod.config.settings import MemoryConfig
    from autod.memory.store import ChromaMemory

    class Zero:
        dim = 2
        def embed(self, texts):
            return [[1.0, 0.0] for _ in texts]

    async def main():
        mem = await ChromaMemory.open(MemoryConfig(), Path(sys.argv[1]), embedder=Zero(),
                                      read_only=sys.argv[2] == "ro")
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)
        await mem.close()

    asyncio.run(main())
    """
)


class Zero:
    dim = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


async def _open(state: Path) -> None:
    mem = await ChromaMemory.open(MemoryConfig(), state, embedder=Zero())
    await mem.close()


@pytest.mark.slow
@pytest.mark.parametrize("owner_mode", ["rw", "ro"])
def test_second_process_gets_memory_locked_naming_the_owner_pid(tmp_path: Path, owner_mode: str) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), owner_mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "ready"
        with pytest.raises(MemoryLocked) as info:
            asyncio.run(_open(tmp_path))
        assert info.value.pid == owner.pid
        assert str(owner.pid) in str(info.value)
    finally:
        assert owner.stdin is not None
        owner.stdin.close()
        owner.wait(timeout=60)
    assert owner.returncode == 0
    asyncio.run(_open(tmp_path))  # the owner has gone: the store is free again


@pytest.mark.slow
def test_lock_is_released_when_the_owner_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path), "rw"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    holder.kill()
    holder.wait(timeout=60)
    lock = OwnerLock(tmp_path / "memory")
    lock.acquire()
    assert lock.held
    lock.release()


def test_a_second_opener_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    first = OwnerLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(MemoryLocked):
            OwnerLock(tmp_path).acquire()
    finally:
        first.release()
    again = OwnerLock(tmp_path)
    again.acquire()
    again.release()
