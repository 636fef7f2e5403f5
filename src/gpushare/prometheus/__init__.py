"""One Prometheus layer for the baseline and the release gates: the HTTP client and the ways a query
fails (`client`), answers checked for shape (`answer`), durations and times (`timespec`), and the
thresholds files' shared rules: bounded numbers, `xid_required`, query overrides checked before any
query is sent (`thresholds`). Each bad input raises `InputError` (exit 2), whose message says what
to fix."""


class InputError(ValueError):
    """Bad input to the baseline or the gates: the message says what to fix (exit 2)."""
