"""The names and words of a delivery: the branch of a failure, the patch file, the commit message."""

from __future__ import annotations

import re
from typing import Any

from autod import logs
from autod.linebreaks import lines_of

SLUG_MAX = 40


def slug(text: str) -> str:
    """Lowercase words joined by '-', at most SLUG_MAX characters (safe in a ref and a file name)."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:SLUG_MAX].rstrip("-") or "fix"


def branch_name(prefix: str, mode: str, summary: str, fingerprint: str) -> str:
    """PREFIX/MODE/SLUG-FP: one branch per failure (the fingerprint), readable in `git branch`."""
    return f"{prefix}/{mode}/{slug(summary)}-{fingerprint[:10]}"


def patch_name(mode: str, summary: str, fingerprint: str) -> str:
    return f"{mode}-{slug(summary)}-{fingerprint[:10]}.patch"


def commit_message(
    *,
    mode: str,
    described: str = "",
    plan_summary: str,
    event_summary: str,
    excerpt: str,
    edits: list[dict[str, Any]],
    reapplied: list[str],
    base: str,
    status: str,
    reason: str,
    checks: list[dict[str, Any]],
    cycle_id: str,
    fingerprint: str,
) -> str:
    """What failed, what changed and how it was verified, with trailers a script can read."""
    prose = plan_summary.strip()
    first = described.strip() or (lines_of(prose) or ["autod fix"])[0]
    subject = f"autod({mode}): {first}"
    subject = subject if len(subject) <= 72 else subject[:71] + "…"
    lines = [
        subject,
        "",
        f"What failed: {lines_of(event_summary.strip())[0][:300] if event_summary.strip() else '-'}",
    ]
    shown = [ln for ln in lines_of(excerpt.strip()) if ln.strip()][-15:]
    if shown:
        lines += ["", *("    " + ln[:200] for ln in shown)]
    lines += ["", "What changed:"]
    lines += [f"    {e['path']} | +{e['added']} -{e['removed']}" for e in edits]
    if described.strip():
        lines += ["", f"Read from the diff: {described.strip()[:1000]}"]
        if prose:
            lines += ["", "The planner's summary (its own words, not checked against the diff):",
                      *("    " + ln for ln in lines_of(prose[:2000]))]
    elif prose and prose != first:
        lines += ["", prose[:2000]]
    if reapplied:
        lines += [
            "",
            "The working tree had uncommitted changes in "
            + ", ".join(reapplied)
            + "; this commit holds autod's edit re-applied to HEAD's version, without them.",
        ]
    lines += [
        "",
        f"How it was verified: on {base[:12]} with this change, in a mirror of the workspace",
        "(the operator's working tree was not written), the checks ran:",
    ]
    lines += [f"    {c['name']}: exit {c['exit_code']} in {c['duration_ms'] / 1000:.1f}s" for c in checks]
    lines.append(f"Outcome: {status}" + (f" ({reason})" if reason else ""))
    lines += ["", f"Autod-Cycle: {cycle_id}", f"Autod-Fingerprint: {fingerprint}", f"Autod-Mode: {mode}", ""]
    return logs.redact_text("\n".join(lines))
