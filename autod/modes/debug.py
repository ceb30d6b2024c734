"""auto-debug: fix build and check failures, verified by re-running the failing checks."""

from __future__ import annotations

import asyncio

from autod.act.edits import ScopeCheck
from autod.act.judges import Judges, editable_paths
from autod.events import Event, EventKind
from autod.linebreaks import lines_of
from autod.localize.context import localize
from autod.localize.excerpt import trim_failure
from autod.localize.focus import Suspect, reads, render_group, render_values, value_suspects
from autod.memory import Recalled
from autod.memory.recall import fixed_definitions, render_brief
from autod.modes import (
    Attempt,
    ModeEnv,
    Sections,
    Verification,
    chain,
    fitted_budget,
    memory_budget,
    python_syntax_scope,
    recalled_text,
    render,
    tokens,
)
from autod.plan import Plan
from autod.planner.fences import fence_for, fenced
from autod.planner.forms import FORMS
from autod.planner.prefill import head

EXCERPT_SHARE = 0.25  # of the context budget, at most, for the failure output
SUSPECT_DIFF_CHARS = 6000  # a longer diff since green is left to the wide prompt (a suspect's is short)

OR_VALUE = ", or, if the bug is in a value it reads, that value's fixed assignment alone"

# The user prompt's section titles (prompts/debug_user.md): a reply in the code form that reaches one
# has started copying the prompt back (a small model continues the document it was shown); the
# request stops there and the copied blocks are dropped as quotes (autod.planner.codeform).
ECHO_STOPS = ("## Failure output", "## Source (exact file text", "## What autod remembers",
              "## Earlier attempts that did not work")


class DebugMode:
    name = "auto-debug"
    kinds = frozenset({EventKind.CHECK_FAILED, EventKind.BUILD_FAILED})
    writes_code = True

    def __init__(self, reply_form: str = "code") -> None:
        if reply_form not in FORMS:
            raise ValueError(f"unknown reply form {reply_form!r}")
        # how plans are written (llm.reply_form): the planner reads the same form back (PlanRequest.form)
        self.reply_form = reply_form

    @property
    def stop(self) -> tuple[str, ...]:
        """Stop sequences for this mode's requests (the code form's: where a copy of the prompt begins)."""
        return ECHO_STOPS if self.reply_form == "code" else ()

    def handles(self, event: Event) -> bool:
        if event.kind == EventKind.MANUAL:
            return event.target_mode == self.name
        return event.kind in self.kinds

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> Sections:
        payload = event.payload
        raw = str(payload.get("excerpt") or payload.get("message") or event.summary)
        fixed = sum(len(m["content"]) for m in self.messages(event, {}, []))  # the instructions
        budget = await fitted_budget(env, self.name, env.settings.localize.budget_tokens, fixed)
        # the prompt shows the output's digest where the event has one (autod.checks.digest)
        share_chars = int(budget * EXCERPT_SHARE) * 4
        shown = str(payload.get("digest") or raw)
        excerpt = trim_failure(shown[-16000:], share_chars)
        memory = recalled_text(recalled, shown=raw, budget_tokens=memory_budget(env.settings, budget))
        if env.offline:
            # the offline planner runs the fixer checks and reads no prompt: nothing to localize, no
            # failing tests to re-run for a ranking (on a large workspace that was most of its cycle)
            return Sections(excerpt=excerpt, sources="", diff="", memory=memory)
        # the code gets the room the output shown raw would have left it: the tokens the digest saves
        # make the prompt shorter (faster to read), not a different set of code
        failure_tokens = max(tokens(excerpt), tokens(trim_failure(raw[-16000:], share_chars)))
        since = await env.state.call(env.state.get_kv, "last_green_rev")
        spectrum = await self._spectrum(event, env)
        found = await localize(
            env.settings,
            env.boundary,
            text=raw,
            locations=list(payload.get("locations") or []),
            last_green=since if isinstance(since, str) else None,
            budget_tokens=max(500, budget - failure_tokens - tokens(memory)),
            spectrum=spectrum,
            remembered=fixed_definitions(recalled),  # past fixes of similar failures move up (bounded)
        )
        out = Sections(excerpt=excerpt, sources=found.sources, diff=found.diff, memory=memory)
        out.used = found.entries
        out.editable = [str(e["path"]) for e in found.entries if e.get("path")]
        if found.suspects:  # per suspect: the failure, that definition alone, the diff since green
            diff = found.diff if len(found.diff) <= SUSPECT_DIFF_CHARS else ""
            # what memory holds of similar failures, a line each (last: the first cut when over a window)
            brief = render_brief(recalled, budget_tokens=memory_budget(env.settings, budget))
            # in the order a prompt over the server's window is cut from the end (autod.modes.pack)
            # the lines of each definition a reply is given rather than writes (decorators, signature,
            # docstring: autod.planner.prefill), for pricing a draw in seconds (a parse: off the loop)
            heads = await asyncio.to_thread(lambda: [_lines(head(s.code)) for s in found.suspects])
            out.focused = [
                {"path": s.path, "symbol": s.symbol, "reads": reads(s),
                 "code": s.code, "excerpt": excerpt, "diff": diff, "values": render_values(s),
                 "memory": brief, "ran_to": str(s.ran_to or ""), "head_lines": str(given)}
                for s, given in zip(found.suspects, heads, strict=True)
            ] + [  # then the value groups: the values one suspect reads, without it
                {"path": g.path, "symbol": g.symbol, "read_by": g.read_by, "reads": reads(g),
                 "blocks": render_group(g), "excerpt": excerpt, "diff": diff, "memory": brief}
                for g in await self._value_suspects(found.suspects, env)
            ]
            # a suspect the wide prompt had no room for, or a value one reads, may be fixed in its own
            # file (the act rules still judge it)
            more = [s.path for s in found.suspects] + [v.path for s in found.suspects for v in s.values]
            out.editable += [p for p in dict.fromkeys(more) if p not in out.editable]
        return out

    async def _value_suspects(self, found: list[Suspect], env: ModeEnv) -> list[Suspect]:
        """The values the suspects read that a plan may edit, grouped by reader (focus.value_suspects)."""
        paths = {v.path for s in found for v in s.values}
        if not paths or not env.settings.localize.focus_values:
            return []
        judges = Judges.for_settings(env.settings, self.name)
        editable = await asyncio.to_thread(editable_paths, paths, env.boundary, judges)  # stats files
        return value_suspects(found, env.settings.localize.focus_values, frozenset(editable))

    async def _spectrum(self, event: Event, env: ModeEnv) -> dict[tuple[str, str], float] | None:
        """Ochiai scores from re-running the failing tests: for a pytest check unless `coverage: false`."""
        from autod.localize.spectrum import is_pytest, spectrum_for

        name = event.payload.get("check")
        check = env.settings.checks.get(name) if isinstance(name, str) else None
        if check is None or check.coverage is False:
            return None
        if check.coverage is None and not is_pytest(check.run):
            return None

        return await spectrum_for(env, name, str(event.payload.get("excerpt") or ""))

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]:
        if context.get("symbol"):
            return self.suspect_messages(event, context)
        checks = context.get("checks", "")
        tried = "\n\n".join(
            f"Attempt {i}: {a.summary}\nDiff:\n{a.diff[:4000]}\nCheck output after it:\n{a.output[-3000:]}"
            for i, a in enumerate(attempts, 1)
        )
        user = render(
            "debug_user",
            summary=event.summary,
            check=event.payload.get("check", ""),
            excerpt=context.get("excerpt") or "(none)",
            excerpt_fence=fence_for(context.get("excerpt") or ""),
            diff_fence=fence_for(context.get("diff") or ""),
            sources=context.get("sources") or "(no source could be located)",
            diff=context.get("diff") or "(no recent diff)",
            memory=context.get("memory") or "(nothing recalled)",
            attempts=tried or "(none)",
            checks=checks,
            reply=FORMS[self.reply_form].reply_line,
        )
        system = render("debug_system_code" if self.reply_form == "code" else "debug_system")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def suspect_messages(self, event: Event, context: dict[str, str]) -> list[dict[str, str]]:
        """A focused draw's prompt (Sections.focused): the failure and one suspect definition alone,
        asked for its complete fixed source, in the fenced block the oracle's replies use
        (bench/reallib_e2e.py), with what memory holds of similar failures a line each; no outline or
        earlier attempts (a repeat is redrawn). A value group's prompt shows the values one suspect
        reads, without it, and asks for the wrong one's fixed assignment.

        Every focused prompt of a cycle opens with the same text: one system message for suspects and
        value groups alike, then the failure, the diff and what memory holds; what differs (the values,
        the suspect, the question) comes last. A server that keeps the prompt it last read (llama.cpp,
        vLLM's prefix cache, OpenAI's prompt caching) then reads only each draw's own part: on a CPU,
        reading a prompt is most of a short draw's time."""
        diff = context.get("diff") or ""
        memory = context.get("memory") or ""
        memory = f"\nWhat autod remembers of similar failures:\n{memory}\n" if memory else ""
        if context.get("read_by"):  # a value group: the values one suspect reads, without it
            named = [line.split("\t") for line in lines_of(context.get("reads") or "")]
            files = list(dict.fromkeys(path for path, _ in named))
            if len(named) == 1:
                which = f"this value, `{named[0][1]}` in `{named[0][0]}`,"
                ask = f"the fixed assignment of `{named[0][1]}` alone"
            else:
                which = f"one of these values in `{files[0]}`," if len(files) == 1 else "one of these values,"
                ask = "the fixed assignment of the wrong value alone"
            user = render(
                "debug_value_user",
                check=event.payload.get("check", "") or event.summary,
                excerpt=context.get("excerpt") or "(none)",
                excerpt_fence=fence_for(context.get("excerpt") or ""),
                diff=f"\nIt passed before these changes:\n\n{fenced(diff, 'diff')}\n" if diff else "",
                memory=memory,
                which=which,
                read_by=context.get("read_by"),
                blocks=context.get("blocks") or "",
                ask=ask,
            )
            return [{"role": "system", "content": render("debug_focused_system")},
                    {"role": "user", "content": user}]
        values = context.get("values") or ""
        user = render(
            "debug_suspect_user",
            check=event.payload.get("check", "") or event.summary,
            excerpt=context.get("excerpt") or "(none)",
            excerpt_fence=fence_for(context.get("excerpt") or ""),
            diff=f"\nIt passed before these changes:\n\n{fenced(diff, 'diff')}\n" if diff else "",
            values=f"\nIt reads these values:\n\n{fenced(values, 'python')}\n" if values else "",
            memory=memory,
            path=context.get("path"),
            symbol=context.get("symbol"),
            code=context.get("code"),
            code_fence=fence_for(context.get("code") or ""),
            or_value=OR_VALUE if values else "",
        )
        return [{"role": "system", "content": render("debug_focused_system")},
                {"role": "user", "content": user}]

    def scope(self, env: ModeEnv) -> ScopeCheck | None:
        judges = Judges.for_settings(env.settings, self.name)
        return chain(judges.scope() if judges else None, python_syntax_scope)

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification:
        from autod.modes.verifying import verify_by_checks

        return await verify_by_checks(event, plan, env)


def _lines(text: str) -> int:
    return text.count("\n") + 1 if text else 0
