"""The daemon's side of the operator surface: the control `socket` (one JSON request, one answer,
0600, peers checked by `peers` with SO_PEERCRED), the `commands` it serves (status, approve, trigger,
retry, pause...), and `undo`, which takes back a kept cycle under the workspace lock."""
