"""deploy/rbac on the real API server: the runbook identity holds every verb the manifests grant and
nothing more of what matters (Secrets, deleting nodes, Deployments outside the share check's
namespace, RBAC itself), and an enable then a rollback run with it are never denied, each request
allowed by a role meant for that runbook (the audit log says so)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare_testbed.kueue import TEAM_NAMESPACES
from gpushare.dra.plan import device_class
from gpushare.dra.settings import PilotSettings, Settings
from gpushare.rbac import RUNBOOK_USER, manifests
from gpushare.rbac.audit import Grant, check, grants, read_requests
from tests.support.ansible import run_playbook
from tests.support.cluster import Cluster
from tests.support.dra_driver import SHARING_GATES, set_driver_gates

pytestmark = pytest.mark.cluster
SHARE_CHECK_NAMESPACE = "gpushare-share-check"


def allowed(api: client.ApiClient, verb: str, resource: str, group: str = "", namespace: str = "", name: str = "",
            subresource: str = "") -> bool:
    """What the API server's authorizer answers for the runbook identity (a SelfSubjectAccessReview)."""
    attributes = client.V1ResourceAttributes(verb=verb, resource=resource, group=group, namespace=namespace or None,
                                             name=name or None, subresource=subresource or None)
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)))
    return bool(review.status.allowed)


@pytest.mark.parametrize(("what", "attributes"), [
    ("read a Secret in the operator namespace", ("get", "secrets", "", "gpu-operator", "any")),
    ("list Secrets anywhere", ("list", "secrets", "", "", "")),
    ("delete a node", ("delete", "nodes", "", "", "gpu-node")),
    ("patch a Deployment outside the share check's namespace", ("patch", "deployments", "apps", "default", "web")),
    ("create a Deployment in kube-system", ("create", "deployments", "apps", "kube-system", "")),
    ("create a pod outside the share check's namespace", ("create", "pods", "", "default", "")),
    ("delete a pod outside the operator namespace", ("delete", "pods", "", "default", "web")),
    ("create a ClusterRoleBinding", ("create", "clusterrolebindings", "rbac.authorization.k8s.io", "", "")),
    ("create a RoleBinding in the operator namespace", ("create", "rolebindings", "rbac.authorization.k8s.io",
                                                         "gpu-operator", "")),
    ("escalate a ClusterRole", ("escalate", "clusterroles", "rbac.authorization.k8s.io", "", "cluster-admin")),
    ("delete a namespace", ("delete", "namespaces", "", "", SHARE_CHECK_NAMESPACE)),
    ("patch another ClusterPolicy", ("patch", "clusterpolicies", "nvidia.com", "", "other-policy")),
    ("patch the GPU Operator's DaemonSets", ("patch", "daemonsets", "apps", "gpu-operator", "nvidia-device-plugin-daemonset")),
    ("delete ConfigMaps in kube-system", ("delete", "configmaps", "", "kube-system", "kube-root-ca.crt")),
    ("exec into the operator's pods", ("create", "pods", "", "gpu-operator", "any", "exec")),
    ("patch the device plugin's entrypoint script", ("patch", "configmaps", "", "gpu-operator",
                                                     "nvidia-device-plugin-entrypoint")),
    ("patch any other ConfigMap in the operator namespace", ("patch", "configmaps", "", "gpu-operator", "any")),
    ("delete a ConfigMap in the operator namespace but its own", ("delete", "configmaps", "", "gpu-operator",
                                                                   "default-mig-parted-config")),
    ("take a Lease in the operator namespace", ("create", "leases", "coordination.k8s.io", "gpu-operator", "")),
    ("create a ResourceClaim outside the share check's namespace", ("create", "resourceclaims", "resource.k8s.io",
                                                                    "default", "")),
    ("update the DRA driver's DeviceClass", ("update", "deviceclasses", "resource.k8s.io", "", "gpu.nvidia.com")),
    ("delete the DRA pilot's DeviceClass", ("delete", "deviceclasses", "resource.k8s.io", "", "gpu-pilot.gpushare.io")),
    ("write a ResourceSlice", ("create", "resourceslices", "resource.k8s.io", "", "")),
])
def test_the_runbook_identity_cannot(runbook_api: client.ApiClient, cluster: Cluster, what: str,
                                     attributes: tuple[str, ...]) -> None:
    verb, resource, group, namespace, name, *sub = attributes
    namespace = cluster.operator_namespace if namespace == "gpu-operator" else namespace
    assert not allowed(runbook_api, verb, resource, group, namespace, name, *sub), f"the runbook identity may {what}"


def test_real_requests_beyond_its_rights_are_refused(runbook_api: client.ApiClient, cluster: Cluster) -> None:
    core, rbac = client.CoreV1Api(runbook_api), client.RbacAuthorizationV1Api(runbook_api)
    binding = client.V1ClusterRoleBinding(metadata=client.V1ObjectMeta(name="gpushare-runbook-escalation"),
                                          role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                                                    kind="ClusterRole", name="cluster-admin"),
                                          subjects=[client.RbacV1Subject(kind="User", name=RUNBOOK_USER)])
    attempts = {
        "list Secrets": lambda: core.list_secret_for_all_namespaces(),
        "delete a node": lambda: core.delete_node("gpu-node", dry_run="All"),
        "make itself cluster-admin": lambda: rbac.create_cluster_role_binding(binding, dry_run="All"),
        "patch a Deployment in kube-system": lambda: client.AppsV1Api(runbook_api).patch_namespaced_deployment(
            "coredns", "kube-system", {"metadata": {"labels": {"x": "y"}}}, dry_run="All"),
    }
    statuses = {}
    for what, attempt in attempts.items():
        with pytest.raises(ApiException) as refused:
            attempt()
        statuses[what] = refused.value.status
    assert statuses == dict.fromkeys(attempts, 403)


def test_a_device_class_is_only_dry_run(runbook_api: client.ApiClient) -> None:
    """dra-readiness.yml's DeviceClass create is a server-side dry run of its probe; the admission policy refuses a
    real one, and a dry run of any other DeviceClass but the pilot's."""
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"generateName": "gpushare-readiness-", "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    custom = client.CustomObjectsApi(runbook_api)
    assert custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", body, dry_run="All")
    for refused, dry_run in ((body, None), ({**body, "metadata": {**body["metadata"], "generateName": "gpushare-"}}, "All")):
        with pytest.raises(ApiException) as denied:
            custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", refused, dry_run=dry_run)
        assert denied.value.status == 403
        assert "may only dry-run the readiness probe DeviceClass" in denied.value.body


def test_the_dra_pilot_may_write_its_own_device_class_only(runbook_api: client.ApiClient, cluster: Cluster) -> None:
    """enable-dra-pilot.yml creates gpu-pilot.gpushare.io as gpushare.dra.plan.device_class writes it; another driver's
    config or another kind of config is refused (tests/security/test_write_model.py attacks every field)."""
    custom = client.CustomObjectsApi(runbook_api)
    pilot = device_class(PilotSettings(readiness=Settings()))

    def create(body: dict[str, Any]) -> Any:
        return custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", body)

    opaque = pilot["spec"]["config"][0]["opaque"]
    for changed in ({**opaque, "driver": "other.example.com"}, {**opaque, "parameters": {**opaque["parameters"],
                                                                                         "kind": "Anything"}}):
        body = {**pilot, "spec": {**pilot["spec"], "config": [{"opaque": changed}]}}
        message = _refusal(lambda body=body: create(body))
        assert "or write the DRA pilot's gpu-pilot.gpushare.io as enable-dra-pilot.yml writes it" in message, message
    try:
        assert create(pilot)["metadata"]["name"] == "gpu-pilot.gpushare.io"
    finally:
        cluster.custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "gpu-pilot.gpushare.io")


def _privileged_pod(node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpushare-root-on-node"},
            "spec": {"nodeName": node, "hostPID": True, "containers": [{
                "name": "root", "image": "busybox", "command": ["nsenter", "-t", "1", "-a", "sh"],
                "securityContext": {"privileged": True}}]}}


def test_a_privileged_host_pid_pod_in_the_share_check_namespace_is_refused(runbook_api: client.ApiClient,
                                                                           cluster: Cluster) -> None:
    """The runbook identity may create pods in the share check's namespace; Pod Security admission
    "restricted" on it refuses one that would be root on a node (its message names the profile)."""
    (node, *_) = cluster.gpu_nodes()
    core = client.CoreV1Api(runbook_api)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(SHARE_CHECK_NAMESPACE, _privileged_pod(node), dry_run="All")
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message, message
    assert "privileged" in message and "hostPID" in message, message


def _refusal(attempt: Any) -> str:
    with pytest.raises(ApiException) as refused:
        attempt()
    assert refused.value.status == 403, refused.value.body
    return json.loads(refused.value.body)["message"]


@pytest.fixture
def foreign_taint(cluster: Cluster) -> Iterator[dict[str, str]]:
    """A taint someone else put on a GPU node (the admin), removed afterwards."""
    (node, *_) = cluster.gpu_nodes()
    taint = {"key": "team.example.com/dedicated", "value": "ml", "effect": "NoSchedule"}
    taints = [t.to_dict() for t in cluster.node(node).spec.taints or []]
    cluster.core.patch_node(node, {"spec": {"taints": [*taints, taint]}})
    yield {"node": node, **taint}
    cluster.core.patch_node(node, {"spec": {"taints": [t.to_dict() for t in cluster.node(node).spec.taints or []
                                                       if t.key != taint["key"]] or None}})


def test_node_writes_outside_what_the_runbooks_own_are_refused(runbook_api: client.ApiClient, cluster: Cluster,
                                                               foreign_taint: dict[str, str]) -> None:
    """deploy/rbac/60-admission-policies.yaml: Node patches only on GPU nodes, only the owned fields."""
    core = client.CoreV1Api(runbook_api)
    node = foreign_taint["node"]
    cpu = next(n.metadata.name for n in cluster.core.list_node().items
               if "nvidia.com/gpu.present" not in (n.metadata.labels or {}))
    policy = "ValidatingAdmissionPolicy 'gpushare-runbook-nodes' with binding 'gpushare-runbook-nodes' denied request"
    message = _refusal(lambda: core.patch_node(cpu, {"metadata": {"labels": {"gpu-mode": "shared"}}}, dry_run="All"))
    assert policy in message and f"node {cpu} has no label nvidia.com/gpu.present" in message, message
    message = _refusal(lambda: core.patch_node(node, {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
                                               dry_run="All"))
    assert policy in message and "may not change metadata.labels node-role.kubernetes.io/control-plane" in message
    kept = [t.to_dict() for t in cluster.node(node).spec.taints if t.key != foreign_taint["key"]]
    message = _refusal(lambda: core.patch_node(node, {"spec": {"taints": kept or None}}, dry_run="All"))
    assert policy in message and "may not add, change or remove spec.taints" in message, message
    # the DRA pilot switches the device plugin off and the DRA kubelet plugin on, with those values only
    for label, value in (("nvidia.com/gpu.deploy.device-plugin", "paused-for-mig-change"),
                         ("nvidia.com/dra-kubelet-plugin", "false")):
        message = _refusal(lambda label=label, value=value: core.patch_node(
            node, {"metadata": {"labels": {label: value}}}, dry_run="All"))
        assert policy in message and "may set nvidia.com/gpu.deploy.device-plugin only to true or false" in message
    # what the runbooks do write passes: the pool label, a gpushare.io annotation, the cordon, the DRA switch
    core.patch_node(node, {"metadata": {"labels": {"gpu-mode": "shared"}, "annotations": {"gpushare.io/x": "y"}},
                           "spec": {"unschedulable": True}}, dry_run="All")
    core.patch_node(node, {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false",
                                                   "nvidia.com/dra-kubelet-plugin": "true"}}}, dry_run="All")


def test_clusterpolicy_fields_the_runbooks_do_not_write_are_refused(runbook_api: client.ApiClient,
                                                                     cluster: Cluster) -> None:
    custom = client.CustomObjectsApi(runbook_api)

    def patch(body: dict[str, Any]) -> Any:
        return custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy", body,
                                                  dry_run="All")

    message = _refusal(lambda: patch({"spec": {"driver": {"repository": "evil.example.com/driver"}}}))
    assert ("ValidatingAdmissionPolicy 'gpushare-runbook-clusterpolicy'" in message
            and message.endswith("of ClusterPolicy cluster-policy, not spec.driver")), message
    message = _refusal(lambda: patch({"spec": {"devicePlugin": {"image": "evil"}}}))
    assert message.endswith("not spec.devicePlugin.image"), message
    patch({"spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "any"}}}})


def test_the_operators_entrypoint_configmaps_cannot_be_patched(runbook_api: client.ApiClient, cluster: Cluster) -> None:
    """The entrypoint scripts run as root in the operator's privileged pods: the runbook identity's
    ConfigMap patch right names time-slicing-config alone, so RBAC refuses them."""
    core = client.CoreV1Api(runbook_api)
    names = [c.metadata.name for c in cluster.core.list_namespaced_config_map(cluster.operator_namespace).items
             if c.metadata.name.endswith("-entrypoint")]
    assert "nvidia-device-plugin-entrypoint" in names, names
    for name in names:
        message = _refusal(lambda name=name: core.patch_namespaced_config_map(
            name, cluster.operator_namespace, {"data": {"entrypoint.sh": "#!/bin/sh\nid\n"}}, dry_run="All"))
        assert (f'configmaps "{name}" is forbidden: User "{RUNBOOK_USER}" cannot patch resource "configmaps" in API '
                f'group "" in the namespace "{cluster.operator_namespace}"') in message, message


def test_configmaps_in_the_runbooks_namespace_the_runbooks_did_not_write_are_refused(
        runbook_api: client.ApiClient, cluster: Cluster) -> None:
    """The runbook identity may patch any ConfigMap of its own namespace by RBAC (run records have
    generated names); the admission policy still keeps it to the ones the runbooks wrote."""
    foreign = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="gpushare-test-foreign"), data={"a": "b"})
    cluster.core.create_namespaced_config_map(cluster.records_namespace, foreign)
    try:
        message = _refusal(lambda: client.CoreV1Api(runbook_api).patch_namespaced_config_map(
            "gpushare-test-foreign", cluster.records_namespace, {"data": {"a": "c"}}, dry_run="All"))
        assert "ValidatingAdmissionPolicy 'gpushare-runbook-configmaps'" in message, message
        assert f"not update ConfigMap {cluster.records_namespace}/gpushare-test-foreign" in message, message
    finally:
        cluster.core.delete_namespaced_config_map("gpushare-test-foreign", cluster.records_namespace)


def _granted(cluster: Cluster) -> list[Grant]:
    return grants(manifests(cluster.operator_namespace), RUNBOOK_USER)


def test_every_verb_deploy_rbac_grants_is_in_force(runbook_api: client.ApiClient, cluster: Cluster) -> None:
    granted = _granted(cluster)
    assert granted
    missing = [g.describe() for g in granted if not allowed(
        runbook_api, g.verb, g.resource.split("/")[0], g.api_group, g.namespace or "", g.name,
        g.resource.split("/")[1] if "/" in g.resource else "")]
    assert not missing, f"granted by deploy/rbac but refused by the API server: {missing}"


def test_an_enable_and_its_rollback_as_the_runbook_identity_are_never_denied(
        runbook_api: client.ApiClient, clean_cluster: Cluster, tmp_path: Path) -> None:
    if not clean_cluster.embedded:
        pytest.skip("reads the embedded cluster's audit log")
    inputs: dict[str, Any] = {"timeslicing_backup_dir": str(tmp_path / "backups")}
    requests = []
    for playbook in ("enable-timeslicing.yml", "rollback-timeslicing.yml"):
        mark = clean_cluster.audit_mark()
        run = run_playbook(clean_cluster, playbook, tmp_path / playbook, limit="gpu-node", extravars=inputs)
        assert run.ok, run.describe()
        requests += read_requests(clean_cluster.state_dir / "audit.log", RUNBOOK_USER, mark,
                                  clean_cluster.audit_mark(), Path(playbook).stem)
    report = check(requests, _granted(clean_cluster))
    writes = [r for r in requests if r.verb in ("create", "patch", "update", "delete")]
    assert writes, "the runs wrote nothing as the runbook identity: the audit log does not show them"
    assert not report.denied, [r.describe() for r in report.denied]
    assert not report.outside_runbook, [f"{r.runbook}: {r.describe()}" for r in report.outside_runbook]


def test_a_dra_pilot_enable_verify_and_rollback_as_the_runbook_identity_are_never_denied(
        runbook_api: client.ApiClient, clean_cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if not clean_cluster.embedded:
        pytest.skip("reads the embedded cluster's audit log")
    request.addfinalizer(set_driver_gates(clean_cluster, {SHARING_GATES["timeslicing"]: True}))
    requests = []
    for playbook in ("enable-dra-pilot.yml", "verify-dra-pilot.yml", "rollback-dra-pilot.yml"):
        mark = clean_cluster.audit_mark()
        run = run_playbook(clean_cluster, playbook, tmp_path / playbook, limit="gpu-node")
        assert run.ok, run.describe()
        requests += read_requests(clean_cluster.state_dir / "audit.log", RUNBOOK_USER, mark,
                                  clean_cluster.audit_mark(), Path(playbook).stem)
    report = check(requests, _granted(clean_cluster))
    assert [r for r in requests if r.verb in ("create", "patch", "update")], "the audit log shows no write"
    assert not report.denied, [r.describe() for r in report.denied]
    assert not report.outside_runbook, [f"{r.runbook}: {r.describe()}" for r in report.outside_runbook]


def _render_and_apply(cluster: Cluster, *options: str) -> None:
    """What deploy/rbac/README.md tells an administrator: `gpushare rbac render ... | kubectl apply --server-side -f -`
    (with the team namespaces `gpushare sim up` renders for)."""
    teams = [option for namespace in TEAM_NAMESPACES for option in ("--team-namespace", namespace)]
    rendered = subprocess.run([sys.executable, "-m", "gpushare", "rbac", "render", "--operator-namespace",
                               cluster.operator_namespace, *teams, *options], capture_output=True, text=True, check=True,
                              timeout=60)
    cluster.kubectl("apply", "--server-side", "-f", "-", stdin=rendered.stdout)


def test_a_configmap_name_the_rbac_was_not_rendered_for_is_refused_until_it_is(
        runbook_api: client.ApiClient, clean_cluster: Cluster, tmp_path: Path) -> None:
    """deploy/rbac grants patch of the time-slicing ConfigMap by name: an enable with another
    timeslicing_configmap_name is refused by its preflight (a SelfSubjectAccessReview) before any
    write, naming the render that fixes it; once an administrator applied it, the same run works, and
    so does its rollback."""
    if not clean_cluster.embedded:
        pytest.skip("reads the embedded cluster's audit log; changes the cluster's RBAC")
    namespace = clean_cluster.operator_namespace
    inputs: dict[str, Any] = {"timeslicing_backup_dir": str(tmp_path / "backups"), "timeslicing_configmap_name": "other-config"}
    assert not allowed(runbook_api, "patch", "configmaps", "", namespace, "other-config")
    mark = clean_cluster.audit_mark()
    refused = run_playbook(clean_cluster, "enable-timeslicing.yml", tmp_path / "refused", limit="gpu-node", extravars=inputs)
    assert not refused.ok
    fix = (f"The runbook identity ({RUNBOOK_USER}) may not patch ConfigMap {namespace}/other-config: the RBAC was "
           f"rendered for other names. As a cluster administrator run `gpushare rbac render --operator-namespace "
           f"{namespace} --timeslicing-configmap other-config | kubectl apply --server-side -f -`, then run this again. "
           "Nothing was changed.")
    assert fix in refused.stdout, refused.describe()
    assert clean_cluster.audit_writes(mark, RUNBOOK_USER, dry_runs=True) == [], "the refused run wrote"
    questions = [e for e in clean_cluster.audit_events(mark) if (e.get("objectRef") or {}).get("resource")
                 == "selfsubjectaccessreviews" and e.get("user", {}).get("username") == RUNBOOK_USER]
    assert questions, "the preflight asked the authorizer nothing"
    try:
        _render_and_apply(clean_cluster, "--timeslicing-configmap", "other-config")
        assert allowed(runbook_api, "patch", "configmaps", "", namespace, "other-config")
        for playbook in ("enable-timeslicing.yml", "rollback-timeslicing.yml"):
            run = run_playbook(clean_cluster, playbook, tmp_path / playbook, limit="gpu-node", extravars=inputs)
            assert run.ok, run.describe()
        assert clean_cluster.core.list_namespaced_config_map(
            namespace, field_selector="metadata.name=other-config").items == [], "the rollback left other-config"
    finally:
        _render_and_apply(clean_cluster)
    assert not allowed(runbook_api, "patch", "configmaps", "", namespace, "other-config")
