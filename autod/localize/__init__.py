"""Localization: from an event to ranked, budgeted code context that any mode can put in a prompt.

`context.localize` is the step; `index` parses the workspace, `resolve` follows names through
imports and receivers, `frames` reads tracebacks and test ids, `history` asks git what changed,
`rank` orders definitions, `render` fills a budget, `need` answers a plan's request for more,
`spectrum` ranks by the failing tests' coverage.
"""
