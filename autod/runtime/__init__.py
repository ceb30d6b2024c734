"""The daemon's runtime, below its supervisor (autod.daemon): the `dispatch` loop that leases events and
runs cycles under the cycle's limits, the events `waiting` for a retry as the operator sees and moves
them, what happens to an event after its cycle (`retry`, `outage`), what is still news (`freshness`,
`checkbook`), `progress` for the systemd watchdog (`notify`), `--once`'s verdict (`once`), the sources
it starts (`sourceset`) and the scheduled `housekeeping`."""
