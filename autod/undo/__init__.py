"""`autod undo CYCLE`: take back one kept cycle.

`ledger` keeps, for each kept cycle that edited the working tree, what autod wrote (a hash of each
file) and what was there before (a copy): written after the cycle keeps its edits, bounded by
`undo.keep_cycles` and `undo.keep_days`. `revert` restores the originals only when every file still
holds what autod wrote (else it refuses, naming each file changed since), through the act journal, so
a crash or `kill -9` mid-undo leaves each file as autod wrote it or as it was; with `git.commit` it
commits the revert. autod.control.undo runs it in the daemon (under the workspace lock) and records it
like a rejection: a reflection record (`status: undone`), a lesson in memory and an attempt on the failure's
fingerprint, so the same fix is not proposed again. Branch and patch deliveries are taken back by
`autod.delivery` (a revert commit on the branch, or the patch withdrawn).
"""

from __future__ import annotations
