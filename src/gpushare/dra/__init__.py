"""The DRA pilot (issue 42): its readiness runbook, which writes nothing."""
