"""What the two time-slicing runbooks (the enable and its rollback) share, and no other runbook
needs: their names, the ClusterPolicy fields they change and the operator's roll (`sharing`), the
node table of their reports (`report`), the enable's node annotation (`mark`). A layer between the
core and the runbook packages (docs/runbook-conventions.md, "Layers"): other runbooks may read the
mark through it, the core imports nothing of it."""
