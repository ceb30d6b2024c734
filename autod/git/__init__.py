"""git as a tool, never as the repository's program: `safe` runs every git command autod runs (no
hooks, fsmonitor, filters, drivers, pager or credential helpers, an explicit repository), `ops`
commits a kept cycle, `exclude` keeps the state dir out of `git status`."""
