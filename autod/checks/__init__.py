"""The only commands autod runs: the checks and fixers in the config, and how they are confined.

`run.run_check` runs one (the program resolved by `programs`, in the bwrap `sandbox` whose mounts are
`mounts`, with the environment of `env`, in a session `process` and `reaper` kill whole); `sourcefiles`
tells the sources a check changed from the output it wrote; `outcome` decides what a verification's
runs mean. It sits below the sources (the check source) and the modes (verification), which both use it.
"""
