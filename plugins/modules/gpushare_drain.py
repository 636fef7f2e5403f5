"""Documentation of the gpushare_drain action (the code: plugins/action/gpushare_drain.py)."""

DOCUMENTATION = r"""
module: gpushare_drain
short_description: Evict the pods of some nodes that hold GPU resources, through the eviction API
version_added: 0.1.0
description:
  - Evicts, through the eviction API (PodDisruptionBudgets apply), the pods of O(nodes) that request O(resources)
    (default the shared replicas, C(nvidia.com/gpu.shared)), retrying a refusing budget every O(retry_delay) seconds.
  - Fails naming what blocks - a refusing budget, or a workload that comes straight back.
  - The nodes must be cordoned first (the runbooks do it in the step before).
author: gpushare platform team (!UNKNOWN)
options:
  nodes:
    description: The Kubernetes node names.
    type: list
    elements: str
    default: []
  resources:
    description: The extended resources whose pods are evicted; empty means the shared replicas.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds the drain of one node may take, retries included.
    type: float
    default: 300
  retry_delay:
    description: Seconds between two tries of an eviction a budget refused.
    type: float
    default: 5
  grace_period:
    description: The pods' termination grace period, in seconds; unset means each pod's own.
    type: int
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
attributes:
  check_mode:
    support: full
    description: Evicts nothing (a dry-run eviction); names the pods it would evict.
"""

EXAMPLES = r"""
- name: Drain | evict the pods that use the shared replicas
  gpushare.gpu_sharing.gpushare_drain:
    nodes: [gpu-node]
    timeout: 300
    retry_delay: 5
"""

RETURN = r"""
evicted:
  description: The pods evicted, each C({pod, workload, controller_uid, namespace}).
  returned: always
  type: list
  elements: dict
problem:
  description: What blocked the drain (empty when it finished).
  returned: always
  type: str
"""
