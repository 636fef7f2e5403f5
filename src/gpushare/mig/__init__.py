"""The MIG partitioning runbooks (enable-mig, rollback-mig): the mig-parted config a node's MIG
manager applies, the profile-fit planner with its fragmentation table, the plan, the checks the
runbook waits for and the report."""
