"""Find the plan JSON in an LLM reply and validate it, with reasons short enough for a repair prompt."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from autod.errors import PlanInvalid
from autod.plan import Plan

MAX_REASON = 300
_EXCERPT = 120  # characters of the reply a reason may quote, at most
_MAX_FAILED_STARTS = 2000  # bounds the scan of a huge reply full of stray braces

# possessive up to the body: the greedy blanks, once given back, were scanned to the reply's end again
# for each split of a run of them (cubic: one fence and 20,000 blanks stalled the loop); the first
# reading is the one that matched anyway (the body runs to the next fence whatever came before it)
_FENCE = re.compile(r"```[ \t]*+(?:json|JSON|javascript|js)?+[ \t]*+\r?+\n?+(.*?)```", re.DOTALL)
# Reasoning models (qwen3, deepseek-r1) think aloud first; braces in there are not the plan.
_THINK = re.compile(r"\A\s*<think>.*?(?:</think>|\Z)", re.DOTALL)
# strict=False: a raw newline or tab inside a string (what a small model writes in a code string
# without a grammar) is taken as the character it is, not refused as "Invalid control character".
_DECODER = json.JSONDecoder(strict=False)


def strip_thinking(text: str) -> str:
    """The reply without a reasoning model's leading `<think>...</think>` (its braces and code are not
    the answer), stripped."""
    return _THINK.sub("", text).strip()


def extract_json(text: str) -> str:
    """The plan JSON object in `text`: bare, fenced, or wrapped in prose. Raises PlanInvalid."""
    if not isinstance(text, str) or not text.strip():
        raise PlanInvalid("the reply is empty")
    text = strip_thinking(text)
    first_error: json.JSONDecodeError | None = None

    # The cheap, common cases first: the whole reply, then each fenced block (last wins).
    # raw_decode tolerates trailing prose after the object.
    whole = [text] + [m.group(1).strip() for m in reversed(list(_FENCE.finditer(text)))]
    for candidate in whole:
        if not candidate.startswith("{"):
            continue
        try:
            obj, end = _DECODER.raw_decode(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        if isinstance(obj, dict) and _is_plan(obj):
            return candidate[:end]

    objects = _scan_objects(text)
    for raw, obj in reversed(objects):
        if _is_plan(obj):
            return raw
    if first_error is not None:
        # A broken plan-shaped reply: its syntax error helps the repair more than an inner fragment.
        err = first_error
        raise PlanInvalid(f"invalid JSON: {err.msg} (line {err.lineno}, column {err.colno})")
    if objects:
        return _lookalike(objects)
    if "{" in text:
        raise PlanInvalid("no complete JSON object in the reply (cut off or unbalanced braces?)")
    raise PlanInvalid(f"no JSON object in the reply: {_excerpt(text)}")


def parse_plan(text: str) -> Plan:
    """Extract and validate the plan in an LLM reply. Raises PlanInvalid with a short reason."""
    obj = _DECODER.decode(extract_json(text))
    try:
        return Plan.model_validate(obj)
    except ValidationError as exc:
        raise PlanInvalid(validation_reason(exc)) from None


def validation_reason(exc: ValidationError) -> str:
    """'edits.0.search: field required; ...' without echoing the input values."""
    parts = []
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    for err in errors[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "(plan)"
        msg = err["msg"]
        parts.append(f"{loc}: {msg[:1].lower()}{msg[1:]}")
    reason = "; ".join(parts)
    if len(errors) > 3:
        reason += f" (+{len(errors) - 3} more)"
    return _cap(reason)


def _scan_objects(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every outermost `{...}` in `text` that parses as a JSON object, in order."""
    found: list[tuple[str, dict[str, Any]]] = []
    failed = 0
    pos = text.find("{")
    while pos != -1 and failed < _MAX_FAILED_STARTS:
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            failed += 1
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found.append((text[pos:end], obj))
        pos = text.find("{", end)
    return found


def _lookalike(objects: list[tuple[str, dict[str, Any]]]) -> str:
    """No valid plan: the last object that looks like one, so validation names what is wrong."""
    for raw, obj in reversed(objects):
        if {"summary", "edits"} & obj.keys():
            return raw
    return objects[-1][0]


def _is_plan(obj: dict[str, Any]) -> bool:
    try:
        Plan.model_validate(obj)
    except ValidationError:
        return False
    return True


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat[:_EXCERPT] + ("..." if len(flat) > _EXCERPT else ""))


def _cap(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."
