"""The actor: confined, capped, atomic, reversible edits. It never calls the LLM or runs commands."""

from autod.act.edits import Boundary, Caps, FileChange, ScopeCheck, prepare, unified_diff
from autod.act.journal import Journal, recover

__all__ = [
    "Boundary",
    "Caps",
    "FileChange",
    "Journal",
    "ScopeCheck",
    "prepare",
    "recover",
    "unified_diff",
]
