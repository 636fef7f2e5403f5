"""Names the inventory's GPU nodes when `-l` matches none (ansible.cfg: vars_plugins); see
gpushare.plugins.limit."""

from gpushare.plugins.limit import VarsModule  # noqa: F401

DOCUMENTATION = """
  name: gpushare_limit
  short_description: an unmatched -l names the inventory's GPU nodes
  description:
    - Adds no variables. While the inventory is read, an -l whose plain names match no host or group prints
      which GPU nodes (group gpu_nodes) the inventory has, before Ansible refuses the limit.
  options:
    stage:
      description: Runs only while the inventory is read, before Ansible checks the limit.
      default: inventory
      choices: [inventory]
"""
