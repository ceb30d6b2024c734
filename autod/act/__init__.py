"""The actor: confined, capped, atomic, reversible edits. It never calls the LLM or runs commands."""

from autod.act.edits import Caps, Confinement, FileChange, ScopeCheck, prepare, unified_diff
from autod.act.journal import Journal, recover

__all__ = [
    "Caps",
    "Confinement",
    "FileChange",
    "Journal",
    "ScopeCheck",
    "prepare",
    "recover",
    "unified_diff",
]
