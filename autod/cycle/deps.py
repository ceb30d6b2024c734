"""What a cycle is given: the parts it calls (`CycleDeps`, built by the daemon's wiring and rebuilt on
every reload) and the hooks run after it keeps its edits, which see values, never the cycle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autod.act.edits import FileChange
from autod.cycle.limits import CircuitBreaker, Gate
from autod.events import Event
from autod.memory import Memory
from autod.modes import ModeEnv
from autod.ownwrites import OwnWrites
from autod.planner import Planner
from autod.reflection import Reflection

if TYPE_CHECKING:
    from autod.delivery.deliver import Delivery
    from autod.isolation import Isolation
    from autod.transcripts import TranscriptStore

# After a cycle keeps its edits in the working tree: (its record, its event, its diff, the changes kept).
# A hook may add to the record (the commit it made).
AfterKeep = Callable[[Reflection, Event, str, list[FileChange]], Awaitable[None]]


@dataclass(frozen=True)  # a part of the daemon's wiring: replaced whole, never changed in place
class CycleDeps:
    env: ModeEnv
    gate: Gate
    planner: Planner
    planner_name: str
    own_writes: OwnWrites
    breaker: CircuitBreaker | None = None
    extra_after_keep: list[AfterKeep] = field(default_factory=list)  # e.g. the git commit, the undo ledger
    isolation: Isolation | None = None  # the workspace's mirror, where candidates are verified
    transcripts: TranscriptStore | None = None  # where each cycle's exchanges with the model are kept
    delivery: Delivery | None = None  # branch/patch modes never write the working tree

    @property
    def memory(self) -> Memory | None:
        return self.env.memory
