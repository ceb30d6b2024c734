"""autod's durable stores, both SQLite in the state dir: the event queue (durable, coalescing, with
retries and their backoff) and the state db (the cycles journal, proposals, counters, fingerprints,
the pause flag). Everything else that persists is owned by its capability (memory, transcripts,
delivery, webhooks)."""
