"""The staged rollout of time-slicing across a fleet: canary, batches, replicas raised, each step
decided by the release gates, its progress recorded in the cluster."""
