"""A GPU Operator, device plugin, feature discovery and MIG manager simulator for test clusters."""
