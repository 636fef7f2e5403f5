"""The time-slicing (and MPS) rollback runbook: the inputs, the plan, the checks it waits for, the
report and its filters. Everything here is pure Python over plain dicts (no I/O) except `checks`,
which reads through a Session while it waits. What it shares with the enable: gpushare.timeslicing_common."""
