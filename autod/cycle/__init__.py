"""One Observe -> Plan -> Act -> Reflect cycle for one event and one mode: `phases` runs it (the
candidate search is autod.candidates, the edits autod.act, what checks say autod.checks.outcome),
`reflect` turns its end into the reflection record, the episode and the lesson, and `proposal` holds
a plan for a person. Whether a cycle may start at all is decided next to it: `limits` (rate, caps,
token budget, quarantine, the LLM breaker) and `delivery_cap` (branch and patch fixes at their cap)."""
