"""The only commands autod runs: the checks and fixers in the config, and how they are confined.

`run.run_check` runs one (the program resolved by `programs`, in the bwrap `sandbox` whose mounts are
`mounts`, with the environment autod.confinement allows, in a session `process` and `reaper` kill
whole); `sourcefiles` tells the sources a check changed from the output it wrote; `outcome` decides
what a verification's runs mean; `source` is the event source that runs the checks at start-up,
after a change and on cron, and turns a failure into a `check_failed` event. It sits below the modes
(verification) and above the failure parsers of autod.sources and the tracebacks of autod.localize.
"""
