"""What every runbook shares, written once."""
