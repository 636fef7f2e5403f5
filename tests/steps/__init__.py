"""The shared Gherkin step library: small steps in the operator's words, one module per topic."""

pytest_plugins = ["tests.steps.cluster_steps", "tests.steps.runbook_steps", "tests.steps.rollback_steps",
                  "tests.steps.workload_steps", "tests.steps.interruption_steps", "tests.steps.share_check_steps",
                  "tests.steps.queue_steps", "tests.steps.queue_dra_steps",
                  "tests.steps.baseline_steps", "tests.steps.mig_steps",
                  "tests.steps.rollout_steps", "tests.steps.fault_steps", "tests.steps.dra_steps"]
