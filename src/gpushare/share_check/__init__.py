"""The share check of verify-sharing.yml: the seed's pods on each trial node, planned, waited for
and judged here; the share_check role only wires these into its tasks."""
