"""The daemon on top of everything: the `supervisor` owns the task tree (sources, queue, dispatcher,
control socket, housekeeping, watchdog, signals, reload), `wiring` builds what the config decides
(planner, gate, retry policy, modes, the cycle's dependencies) at start and on every reload, and
`preflight` checks that the config can work on this machine (`autod config check` and start-up)."""
