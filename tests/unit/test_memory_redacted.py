"""Every memory write is redacted where it is accepted, whoever writes it, and what `autod memory`
prints is redacted too: a rejection's reason quoted the API key into an N2 lesson (the reject command
wrote it as given), and `autod memory search` printed 23 of its 32 characters (a probe of the seventh
session)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from autod import logs
from autod.cli.common import _block
from autod.memory.resilient import ResilientMemory

KEY = "q7SECRETkeyABCDEFGH0123456789xyzW"


class _Spool:
    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def append(self, kind: str, item_id: str, text: str, meta: dict[str, Any], **kw: Any) -> tuple[int, dict]:
        self.items.append((text, meta))
        return len(self.items), {}


@pytest.fixture
def secret():
    logs.set_secrets([KEY])
    yield KEY
    logs.set_secrets([])


@pytest.mark.parametrize("seed", range(3))
def test_whatever_a_caller_hands_memory_is_spooled_redacted(secret, seed):
    rng = random.Random(seed)
    memory = ResilientMemory.__new__(ResilientMemory)
    memory._spool = _Spool()
    for kind in ("n0", "n1", "n2"):
        text = f"rejected: {rng.choice(['', 'the key ', 'key='])}{secret}{rng.choice(['', '.', ' ok'])}"
        memory._append(kind, "id", text, {"reason": f"said {secret}", "n": 1}, None, 1.0)
    items = memory._spool.items
    assert items and all(secret not in t and secret not in str(m) for t, m in items)


def test_what_memory_prints_is_redacted(secret, capsys):
    _block(f"lesson: do not use {secret}\nanother line")
    out = capsys.readouterr().out
    assert secret not in out and "another line" in out
