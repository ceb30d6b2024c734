"""The daemon's runtime: the `supervisor`'s task tree, the `dispatch` loop that leases events and runs
cycles under the `limits` (rate, caps, budgets, the LLM breaker), what happens to an event after its
cycle (`retry`, `outage`), what is still news (`freshness`, `checkbook`), `progress` for the systemd
watchdog (`notify`), `--once`'s verdict (`once`), the sources it starts (`sourceset`) and the scheduled
`housekeeping`."""
