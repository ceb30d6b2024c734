"""The one YAML file an operator edits: `models` (one pydantic model per section, unknown keys
forbidden, every knob with a default and a bound), `settings` (the whole config, loading, AUTOD_*
overrides, the LLM key from a systemd credential), `errors` (file, line and field of every problem, or
the environment variable it came from). What `autod config check` and start-up verify against the
machine (programs, paths, the sandbox, the LLM) is autod.daemon.preflight."""
