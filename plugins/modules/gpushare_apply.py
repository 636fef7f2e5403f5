"""Documentation of the gpushare_apply action (the code: plugins/action/gpushare_apply.py)."""

DOCUMENTATION = r"""
module: gpushare_apply
short_description: Apply an ordered list of Kubernetes changes, truthfully changed, dry-run in check mode
version_added: 0.1.0
description:
  - Applies the changes a runbook's plan computed, in order, from the controller.
  - A change that would change nothing sends no request, so C(changed) tells the truth and a re-run writes nothing.
  - In check mode every write is a server-side dry run (validated by the API server, never stored); with C(--diff) each
    object is shown before and after.
  - A failed change fails the task naming what this step had already written (RV(written)).
author: gpushare platform team (!UNKNOWN)
options:
  changes:
    description:
      - "The changes, each C({action, kind, name, namespace, body, exists, preconditions, why}): C(action) one of
        V(create) (never overwrites; C(exists: keep) accepts an existing object), V(merge), V(json) (RFC 6902, with
        C(test) operations), V(replace), V(delete) (with uid/resourceVersion C(preconditions)), V(taint), V(untaint)."
      - An unknown key in a change fails the task, naming it.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions
attributes:
  check_mode:
    support: full
    description: A server-side dry run of each write.
  diff_mode:
    support: full
    description: Each changed object before and after.
seealso:
  - module: gpushare.gpu_sharing.gpushare_read
"""

EXAMPLES = r"""
- name: Label the trial node for the shared pool
  gpushare.gpu_sharing.gpushare_apply:
    changes:
      - action: merge
        kind: Node
        name: gpu-node
        body: {metadata: {labels: {gpu-mode: shared, nvidia.com/device-plugin.config: gpu-node}}}
        why: the trial node's device-plugin config key
  register: __timeslicing_label
"""

RETURN = r"""
outcomes:
  description: One line per change, what it did (or would do in check mode).
  returned: always
  type: list
  elements: str
objects:
  description: Each change's object as the API server returned it after the change (V(null) for a delete).
  returned: when there were changes
  type: list
  elements: dict
written:
  description: The changes this step wrote before the one that failed.
  returned: failure
  type: list
  elements: str
failed_change:
  description: The change that failed (kind, namespace/name).
  returned: failure
  type: str
reason:
  description: Why the change failed, as the API server said it (an admission policy's or RBAC's denial, say).
  returned: failure
  type: str
"""
