"""How a cycle ended: one value, decided in one place per path (the judge for a verification).

A `StrEnum`, so a status compares equal to its string in records, logs and the state database.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["KEPT", "Status"]


class Status(StrEnum):
    FIXED = "fixed"  # every check passes, every test that failed before passes
    IMPROVED = "improved"  # fewer failing tests, nothing else worse
    NO_CHANGE = "no_change"  # nothing to change, or nothing changed
    ROLLED_BACK = "rolled_back"  # verified and taken back
    PARTLY_ROLLED_BACK = "partly_rolled_back"  # taken back except files someone else changed meanwhile
    REJECTED = "rejected"  # refused before any write (act rules, judges, the allowance)
    PENDING_APPROVAL = "pending_approval"  # held for `autod approve`
    FAILED = "failed"  # ended by an error outside the repository (LLM, budget, stop)
    REPORTED = "reported"  # a report-only mode wrote its report


KEPT = frozenset({Status.FIXED, Status.IMPROVED, Status.NO_CHANGE})  # a verification whose edits stay
