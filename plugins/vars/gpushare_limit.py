"""Names the inventory's GPU nodes when `-l` matches none. A vars plugin of a collection runs only once
enabled: ANSIBLE_VARS_ENABLED=host_group_vars,gpushare.gpu_sharing.gpushare_limit (or ansible.cfg:
vars_plugins_enabled); the code: gpushare.plugins.limit."""

DOCUMENTATION = """
  name: gpushare_limit
  short_description: an unmatched -l names the inventory's GPU nodes
  version_added: 0.1.0
  description:
    - Adds no variables. While the inventory is read, an -l whose plain names match no host or group prints
      which GPU nodes (group gpu_nodes) the inventory has, before Ansible refuses the limit.
    - Enable it with C(vars_plugins_enabled = host_group_vars,gpushare.gpu_sharing.gpushare_limit) in C(ansible.cfg)
      or C(ANSIBLE_VARS_ENABLED); keep C(host_group_vars) in the list, or group_vars and host_vars are not read.
  options:
    stage:
      description: Runs only while the inventory is read, before Ansible checks the limit.
      default: inventory
      choices: [inventory]
"""

from gpushare.plugins.limit import VarsModule  # noqa: E402, F401 - below the documentation, as ansible-test asks
