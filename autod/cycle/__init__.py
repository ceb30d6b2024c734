"""One Observe -> Plan -> Act -> Reflect cycle for one event and one mode: `phases` runs it (the
candidate search is autod.candidates, the edits autod.act, what checks say autod.checks.outcome) and
`reflect` turns its end into the reflection record, the episode and the lesson."""
