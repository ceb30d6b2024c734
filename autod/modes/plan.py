"""auto-plan: a Markdown report of what to do next. No code edits."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autod.act.edits import ScopeCheck, new_file_mode
from autod.atomicfile import atomic_write
from autod.errors import PlanRejected
from autod.events import Event, EventKind
from autod.memory import Recalled
from autod.modes import Attempt, ModeEnv, Sections, Verification, recalled_text, render
from autod.modes.report import gather_facts, render_facts, render_report, rule_actions
from autod.ownwrites import OwnWrites
from autod.plan import Plan


def write_report_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write a report atomically: 0600 in the state dir (the default), `mode` for one in the workspace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, mode)


class PlanReportMode:
    name = "auto-plan"
    kinds = frozenset({EventKind.SCHEDULE, EventKind.MANUAL})
    writes_code = False
    reply_form = "json"  # a report or docstrings: the JSON plan and its schema
    stop: tuple[str, ...] = ()
    facts: dict[str, Any] | None = None  # what this cycle's context() gathered, for its report

    def handles(self, event: Event) -> bool:
        return event.kind in self.kinds and event.target_mode == self.name

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> Sections:
        self.facts = await gather_facts(env)
        return Sections(
            facts=render_facts(self.facts),
            rules="\n".join(f"- {a}" for a in rule_actions(self.facts)),
            memory=recalled_text(recalled),
        )

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]:
        user = render(
            "plan_user",
            facts=context["facts"],
            memory=context.get("memory") or "(none)",
            message=event.payload.get("message") or "",
        )
        return [{"role": "system", "content": render("plan_system")}, {"role": "user", "content": user}]

    def scope(self, env: ModeEnv) -> ScopeCheck | None:
        def no_edits(change: object) -> None:
            raise PlanRejected("auto-plan writes a report and never edits files")

        return no_edits

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification:
        return Verification("no_change")

    def report_path(self, env: ModeEnv) -> Path:
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        configured = env.settings.modes.auto_plan.report_path
        if configured:
            conf = env.boundary
            _, path = conf.resolve(configured.replace("{date}", day))
            return path
        return env.settings.state_path / "reports" / f"{day}.md"

    async def write_report(self, event: Event, plan: Plan, env: ModeEnv, own: OwnWrites) -> Path:
        facts = self.facts or await gather_facts(env)
        actions = (plan.report or "").strip()
        if actions:
            planned_by = "planned by the LLM" if env.settings.llm.base_url else "derived by rules"
        else:  # the LLM gave no list: the rules still have one
            actions = "\n".join(f"- {a}" for a in rule_actions(facts))
            planned_by = "derived by rules"
        text = render_report(facts, actions, planned_by=planned_by)
        path = self.report_path(env)
        data = text.encode()
        own.record(path, data)
        inside_state = path == env.settings.state_path or env.settings.state_path in path.parents
        mode = 0o600 if inside_state else new_file_mode()  # a report in the workspace looks like any file
        await asyncio.to_thread(write_report_file, path, data, mode)
        return path
