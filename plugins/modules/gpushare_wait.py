"""Documentation of the gpushare_wait action (the code: plugins/action/gpushare_wait.py)."""

DOCUMENTATION = r"""
module: gpushare_wait
short_description: Poll a named check until it finds nothing wrong, bounded
version_added: 0.1.0
description:
  - The runbooks' one polling idiom. A check (C(src/gpushare/plugins/checks.py)) reads the cluster and returns the
    problems it still sees; an empty list means done.
  - Polls come 0.1 s apart for the first second, then the pause doubles up to O(interval).
  - After O(timeout) seconds the task fails naming what is still wrong, followed by O(advice).
author: gpushare platform team (!UNKNOWN)
options:
  check:
    description: The check's name; an unknown name fails the task with the list of known ones.
    type: str
    required: true
  args:
    description: The check's keyword arguments.
    type: dict
    default: {}
  timeout:
    description: Seconds to wait at most.
    type: float
    default: 120
  interval:
    description: The longest pause between two polls, in seconds.
    type: float
    default: 2
  report_only:
    description: Return the problems left at the timeout without failing.
    type: bool
    default: false
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
  - gpushare.gpu_sharing.actions.advice
attributes:
  check_mode:
    support: full
    description: Only reads; in check mode the runbooks wait only where a dry run changes nothing to wait for.
"""

EXAMPLES = r"""
- name: Verify | the trial node advertises its shared replicas
  gpushare.gpu_sharing.gpushare_wait:
    check: timeslicing_enabled
    args: {expected: "{{ _timeslicing_plan.expected }}"}
    timeout: 300
    interval: 1
    advice: Look at the device plugin's logs on the node.
"""

RETURN = r"""
problems:
  description: What the check still found wrong at the end (empty when done).
  returned: always
  type: list
  elements: str
waited:
  description: Seconds waited.
  returned: always
  type: float
"""
