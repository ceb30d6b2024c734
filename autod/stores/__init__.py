"""autod's SQLite stores: the one base every store is built on (`sqlite`: private file, WAL, schema
versions, lock, worker thread), and the two the daemon runs on, both in the state dir: the event
queue (durable, coalescing, with retries and their backoff) and the state db (the cycles journal,
proposals, counters, fingerprints, the pause flag). The other stores on the base belong to their
capability (the delivery ledger, the webhook outbox, the memory spool)."""
