"""Documentation of the gpushare_read action (the code: plugins/action/gpushare_read.py)."""

DOCUMENTATION = r"""
module: gpushare_read
short_description: Read a runbook phase's Kubernetes objects in one go
version_added: 0.1.0
description:
  - Reads the objects a phase of a runbook decides on, from the controller, in one API session (the play's
    C(gpushare_kubeconfig) and C(gpushare_kube_context), else C($KUBECONFIG) or C(~/.kube/config)).
  - A kind the cluster does not serve (say the ClusterPolicy CRD is not installed) comes back as V(null) and is named in
    RV(not_served); a namespace the identity may not read because it does not exist reads as empty.
  - Runs in the controller's task worker (no module is sent to the host), so a read costs milliseconds, not the second
    a Python process importing the Kubernetes client would.
author: gpushare platform team (!UNKNOWN)
options:
  objects:
    description:
      - "What to read, by the alias the result uses: C({alias: {kind, name, namespace, label_selector, field_selector,
        field_selectors, namespaces, trim, pack}})."
      - With C(name), one object (V(null) when it does not exist); without, a list (one list per entry of
        C(field_selectors) or C(namespaces) when given, concatenated).
      - "C(trim: true) (Nodes only) keeps of each node what the runbooks' node model reads; C(pack: true) returns the
        objects as one JSON text for a filter to unpack (Ansible copies and tags every value of a registered result:
        on a 500-node fleet that was most of the read)."
      - An unknown key in an object's spec fails the task, naming it.
    type: dict
    default: {}
  whoami:
    description: Also ask the API server who the credentials are (a SelfSubjectReview), for the run record's operator.
    type: bool
    default: false
  access:
    description:
      - "Also ask the API server's authorizer whether these credentials may send a request, by the alias the result uses:
        C({alias: {verb, kind, namespace, name}}) (C(verb) and C(kind) required; C(kind) one the runbooks know, such as
        V(ConfigMap)). Each is one SelfSubjectAccessReview (authorization.k8s.io/v1), which persists nothing."
      - "The authorizer (RBAC) answers, not admission: a request allowed here may still be refused by an admission policy."
      - An unknown key in a question fails the task, naming it.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
notes:
  - Not C(kubernetes.core.k8s_info) because each of its tasks starts a Python process that imports the Kubernetes client.
seealso:
  - module: gpushare.gpu_sharing.gpushare_apply
  - module: gpushare.gpu_sharing.gpushare_wait
"""

EXAMPLES = r"""
- name: Preflight | read the cluster once
  gpushare.gpu_sharing.gpushare_read:
    whoami: true
    access:
      patch_configmap: {verb: patch, kind: ConfigMap, namespace: gpu-operator, name: time-slicing-config}
    objects:
      clusterpolicy: {kind: ClusterPolicy, name: cluster-policy}
      configmaps: {kind: ConfigMap, namespace: gpu-operator}
      nodes: {kind: Node, field_selectors: ["metadata.name=gpu-node"]}
      fleet: {kind: Node, label_selector: nvidia.com/gpu.present=true, trim: true, pack: true}
  register: __timeslicing_cluster
  run_once: true
"""

RETURN = r"""
resources:
  description: The objects read, by alias (an object or V(null) with C(name), a list without; a JSON text with C(pack)).
  returned: always
  type: dict
versions:
  description: The list resourceVersion of each alias read as one list (a watch from it sees every change since).
  returned: always
  type: dict
not_served:
  description: The aliases whose kind the cluster does not serve.
  returned: always
  type: list
  elements: str
caller:
  description:
    - The command line as typed, the user, and with O(whoami) the identity the API server sees (C(identity)) and both
      together (C(operator)).
  returned: always
  type: dict
server:
  description: The API server's URL.
  returned: always
  type: str
access:
  description: The authorizer's answer to each question of O(access), by alias (C({allowed, reason})).
  returned: always
  type: dict
  sample: {patch_configmap: {allowed: false, reason: ""}}
"""
