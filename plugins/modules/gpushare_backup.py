"""Documentation of the gpushare_backup action (the code: plugins/action/gpushare_backup.py)."""

DOCUMENTATION = r"""
module: gpushare_backup
short_description: Save a file on the control machine, private and never overwritten
version_added: 0.1.0
description:
  - Writes O(content) to O(dest) on the machine that runs ansible-playbook (the controller, not the host), creating
    its directory (when missing) with O(directory_mode) and the file with O(mode).
  - An existing O(dest) fails the task; nothing is ever overwritten.
  - Never through a symbolic link - the directory of O(dest) and the directories it creates are real ones - and an
    existing directory keeps its mode.
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
  mode:
    description: The file's mode, in octal.
    type: str
    default: '0600'
  directory_mode:
    description: The mode of the directories it creates, in octal.
    type: str
    default: '0700'
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions
attributes:
  check_mode:
    support: full
    description: Writes nothing; reports the file it would write as changed.
  diff_mode:
    support: full
    description: The file written, whole; the gpushare stdout callback shows it in one line, with C(-v) whole.
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
