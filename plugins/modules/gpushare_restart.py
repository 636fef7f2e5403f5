"""Documentation of the gpushare_restart action (the code: plugins/action/gpushare_restart.py)."""

DOCUMENTATION = r"""
module: gpushare_restart
short_description: Restart the device plugin and GFD of some nodes only, and wait for them
version_added: 0.1.0
description:
  - Deletes the device-plugin and GPU Feature Discovery pods of O(nodes) that cannot see the device-plugin ConfigMap as
    it is (on an old template, or started before O(configmap) was last written), or all of them with O(force); their
    DaemonSets re-create them. Then waits until the new pods are Ready.
  - Pods on other nodes are never touched.
author: gpushare platform team (!UNKNOWN)
options:
  namespace:
    description: The GPU Operator's namespace.
    type: str
    required: true
  nodes:
    description: The Kubernetes node names.
    type: list
    elements: str
    default: []
  configmap:
    description: The device-plugin ConfigMap whose last write the pods must have started after.
    type: str
    default: ""
  known_readers:
    description:
      - "The readers a previous run left running, as its run record names them (C({configmap, resourceVersion, pods}));
        trusted while the ConfigMap is still at that version, although their start may equal the write's second."
    type: dict
    default: {}
  force:
    description: Restart every reader on O(nodes).
    type: bool
    default: false
  daemonsets:
    description: The readers to restart, by DaemonSet name (the device plugin's alone, say); all of them when empty.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for the new pods to be Ready.
    type: float
    default: 120
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
  - gpushare.gpu_sharing.actions.advice
attributes:
  check_mode:
    support: full
    description: Deletes nothing; names the pods it would restart.
"""

EXAMPLES = r"""
- name: Restart the trial node's device plugin and GFD
  gpushare.gpu_sharing.gpushare_restart:
    namespace: gpu-operator
    nodes: [gpu-node]
    configmap: time-slicing-config
    timeout: 300
"""

RETURN = r"""
restarted:
  description: "The pods deleted (or, in check mode, that would be), by node: C({node: [daemonset/pod, ...]})."
  returned: always
  type: dict
readers:
  description: The uids of the reader pods running at the end, each started after the ConfigMap's write.
  returned: always
  type: list
  elements: str
configmap_version:
  description: The ConfigMap's resourceVersion the RV(readers) started after.
  returned: always
  type: str
problems:
  description: The restarted pods not Ready at the timeout.
  returned: always
  type: list
  elements: str
listed:
  description:
    - "The uids of the readers on each of O(nodes) in the first listing, made after the ConfigMap was read at
      RV(configmap_version): C({node: [uid, ...]}). A reader not among them, later, was created after that write."
  returned: always
  type: dict
"""
