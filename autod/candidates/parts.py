"""A value group's reply that changes several values: each change alone is a candidate too.

A value group's prompt (autod.localize.focus.value_suspects) shows the values one suspect reads and
asks for the wrong one's fixed assignment alone. The 1.5B model answered tabulate-07's with all three
values given back, the wrong flag fixed and two right defaults changed: the reply whole fails the
checks, its one right change alone passes them. Which change is the fix only the checks can tell, and
a check run on the mirror costs no model time: each whole-definition edit of such a reply is tried
alone first, in the reply's order, then the reply whole (autod.candidates.search).
"""

from __future__ import annotations

from autod.plan import Plan


def parts(plan: Plan) -> list[Plan]:
    """One plan per edit when `plan` rewrites several definitions whole, each edit alone; else none."""
    if len(plan.edits) < 2 or not all(e.whole_definition for e in plan.edits):
        return []
    return [plan.model_copy(update={"edits": [e], "summary": f"{plan.summary} (only {e.path} · {e.symbol})"})
            for e in plan.edits]
