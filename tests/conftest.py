"""Shared fixtures: the scripted loopback LLM, a temporary git repository, and `autod run` as a process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llmserver import scripted_llm_fixture

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

scripted_llm = pytest.fixture(scripted_llm_fixture)


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    """A git repository whose test fails: calc.add subtracts."""
    from daemon import make_calc_repo

    return make_calc_repo(tmp_path / "repo")
