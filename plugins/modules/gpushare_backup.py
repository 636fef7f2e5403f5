"""Documentation of the gpushare_backup action (the code: plugins/action/gpushare_backup.py)."""

DOCUMENTATION = r"""
module: gpushare_backup
short_description: Save a file on the control machine, private and never overwritten
version_added: 0.1.0
description:
  - Writes O(content) to O(dest) on the machine that runs ansible-playbook (the controller, not the host), creating
    its directory with mode 0700 and the file with mode 0600.
  - An existing O(dest) fails the task; nothing is ever overwritten.
  - The runbooks write ClusterPolicy backups and change records with it, under C(gpushare_output_dir).
author: gpushare platform team (!UNKNOWN)
options:
  content:
    description: What to write.
    type: str
    required: true
  dest:
    description: The file to create (C(~) is expanded).
    type: path
    required: true
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
attributes:
  check_mode:
    support: full
    description: Writes nothing; reports the file it would write as changed.
"""

EXAMPLES = r"""
- name: Back up the ClusterPolicy
  gpushare.gpu_sharing.gpushare_backup:
    content: "{{ clusterpolicy | ansible.builtin.to_nice_yaml }}"
    dest: "{{ timeslicing_backup_dir }}/clusterpolicy-20261201T093000Z.yaml"
"""

RETURN = r"""
dest:
  description: The file written.
  returned: success
  type: str
"""
