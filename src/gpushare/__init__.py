"""gpushare: runbook automation for safe NVIDIA GPU sharing on Kubernetes."""

__version__ = "0.1.0"
