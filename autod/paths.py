"""Directory names no part of autod reads as project source: VCS data, virtualenvs, tool caches."""

from __future__ import annotations

# Version control, virtualenvs and tool caches: never project source, often huge.
NOT_SOURCE_DIRS = frozenset(
    {
        ".git",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        ".hypothesis",
    }
)
# Build output and autod's default state dir: also skipped when scanning for facts and definitions.
GENERATED_DIRS = frozenset({".autod", "dist", "build", ".eggs"})
