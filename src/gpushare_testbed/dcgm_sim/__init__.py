"""A DCGM-exporter-shaped metrics source for the simulated GPUs: what runs on each card over time,
the exporter's metric names and labels, a live /metrics endpoint and a backfilled history."""
