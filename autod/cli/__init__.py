"""The operator's command line, `autod ...`: `main` parses and calls (thin), `common` holds what every
command shares, `reading` the commands that read what the daemon did, `view` renders for a human,
`logview` reads and follows the JSON log and `logformat` shows one record, `retry` moves waiting
retries, `undo` and `metrics` print what the daemon answers. A command that needs the daemon asks it
over the control socket (autod.control); with the daemon down, read-only commands read the stores
directly."""
