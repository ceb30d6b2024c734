"""Where a verified fix goes: `modes.<mode>.delivery` is `worktree` (the default: the working tree, as
always), `branch` (a commit on the failure's own branch, built with git plumbing in an index of autod's,
optionally pushed, never forced) or `patch` (a `git format-patch` file in `<state_dir>/outbox/`).

With branch or patch the working tree is never written: the cycle calls `Delivery.act` instead of the
journal; the fix is taken onto HEAD (`rebase`: the rule for uncommitted changes), verified on the
workspace's mirror (`verify`, autod.isolation), then committed (`plumbing`) and recorded (`ledger`).
`inventory` knows what is open (the cap, merged or deleted branches, status), `takeback` undoes a
delivery, `checkup` is what `autod config check` says about it, and `desk` is what they share
(settings, ledger, the push). New failures are held at the cap (`delivery.max_open`) before they are
planned by autod.cycle.delivery_cap, with the other limits.
"""

from __future__ import annotations
