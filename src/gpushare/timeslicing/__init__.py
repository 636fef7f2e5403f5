"""Time-slicing runbooks: the inputs, the cluster as read, the plans, the records and the checks.
Everything here is pure Python over plain dicts (no I/O) except `checks`, which reads through a
Session while it waits."""
