"""Documentation of the gpushare_dra_probe action (the code: plugins/action/gpushare_dra_probe.py)."""

DOCUMENTATION = r"""
module: gpushare_dra_probe
short_description: Read what the DRA pilot's readiness decides on, writing nothing
version_added: 0.1.0
description:
  - Reads, from the controller in one API session, what the readiness checks of the DRA pilot judge
    (C(gpushare.dra.probe.read)); the API server's version and resource.k8s.io/v1 discovery, the pilot nodes and their
    pods, the ClusterPolicy and any GPUCluster, the DRA driver's workloads and, for a queue-managed namespace, Kueue's
    and the namespace's ResourceClaimTemplates.
  - With C(inputs.extended_resource) also the C(DRAExtendedResource) gate of kube-apiserver (its /metrics through the
    API) and of kube-scheduler and kube-controller-manager (their /metrics at C(inputs.metrics_urls), with the
    kubeconfig's credentials), a server-side dry run of a DeviceClass with C(extendedResourceName) (persists nothing),
    and the ClusterRoles bound to system:kube-scheduler.
  - A failure to read a component's metrics or to dry-run the DeviceClass is a fact the checks judge, not a failure.
author: gpushare platform team (!UNKNOWN)
options:
  nodes:
    description: The Kubernetes names of the targeted nodes (the pilot is exactly one; the checks say so otherwise).
    type: list
    elements: str
    required: true
  inputs:
    description: The dra_pilot role's inputs (sharing, extended_resource, device_class, metrics_urls, ...).
    type: dict
    required: true
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions.no_diff
attributes:
  check_mode:
    support: full
    description: Only reads (the DeviceClass is a dry run in any mode); runs the same in check mode.
seealso:
  - module: gpushare.gpu_sharing.gpushare_read
"""

EXAMPLES = r"""
- name: Readiness | read the cluster once
  gpushare.gpu_sharing.gpushare_dra_probe:
    nodes: [gpu-node]
    inputs: {sharing: timeslicing, extended_resource: false}
  register: __dra_pilot_probe
  run_once: true
"""

RETURN = r"""
facts:
  description: What the checks judge (gpushare.dra.probe.read), plain data.
  returned: always
  type: dict
"""
