"""The release gates as verify-sharing.yml runs them: inputs, the `gpushare gate` command line,
its verdict as `release_gates_result`, and what the run does on it."""
