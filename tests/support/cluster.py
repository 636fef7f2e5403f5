"""The cluster under test: the embedded one (started once per session) or any cluster given by a
kubeconfig and an inventory. Scenarios talk to it only through this object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from gpushare.kube import api_client
from gpushare.polling import wait_for
from gpushare.rbac import WRITE_MODEL
from gpushare.rbac.audit import read_events
from tests.support.namespaces import delete_test_namespaces

REPO = Path(__file__).resolve().parents[2]
ADMIN_USER = "gpushare-admin"
RUNBOOK_USER = "gpushare-runbook"  # the embedded cluster's runbook certificate (deploy/rbac binds it)
MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
# "create" requests that only ask a question and persist nothing.
REVIEWS = ("selfsubjectreviews", "selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews")


EMBEDDED_NAMESPACE = "gpu-operator"  # where `gpushare sim up` installs the GPU Operator, and the features name it


@dataclass
class Cluster:
    kubeconfig: Path
    inventory: Path
    operator_namespace: str = EMBEDDED_NAMESPACE
    # The runbooks' own namespace (gpu_operator_records_namespace): run records, backups, the lock.
    records_namespace: str = "gpushare-system"
    state_dir: Path | None = None  # set for the embedded cluster only
    bin_dir: Path | None = None
    # The identity the runbooks run with (deploy/rbac's); test steps keep the admin `kubeconfig`.
    runbook_kubeconfig: Path | None = None
    _api: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.runbook_kubeconfig is None:
            self.runbook_kubeconfig = self.kubeconfig

    @property
    def runbook_user(self) -> str:
        """Whom the audit log names for the runbooks' requests (embedded cluster)."""
        return ADMIN_USER if self.runbook_kubeconfig == self.kubeconfig else RUNBOOK_USER

    @property
    def embedded(self) -> bool:
        return self.state_dir is not None

    @property
    def api(self) -> client.ApiClient:
        if self._api is None:
            self._api = api_client(self.kubeconfig)
        return self._api

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        binary = str(self.bin_dir / "kubectl") if self.bin_dir else "kubectl"
        return subprocess.run(
            [binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin, capture_output=True, text=True, check=check, timeout=120,
        )

    def node(self, name: str) -> client.V1Node:
        return self.core.read_node(name)

    def gpu_nodes(self) -> list[str]:
        return sorted(n.metadata.name for n in self.core.list_node(label_selector="nvidia.com/gpu.present=true").items)

    def env(self) -> dict[str, str]:
        """Environment for ansible and the CLI to reach this cluster."""
        env = {"KUBECONFIG": str(self.kubeconfig)}
        if self.state_dir:
            env["GPUSHARE_STATE_DIR"] = str(self.state_dir)
        return env

    # ---- audit log (embedded cluster only) ----------------------------------------------------
    def audit_mark(self) -> int:
        log = self.state_dir / "audit.log" if self.state_dir else None
        return log.stat().st_size if log and log.exists() else 0

    def audit_events(self, since: int) -> list[dict[str, Any]]:
        """Every audit event logged after the `audit_mark` value `since`."""
        if not self.state_dir:
            raise RuntimeError("the audit log is only available on the embedded cluster")
        return read_events(self.state_dir / "audit.log", since)

    def audit_writes(self, since: int, user: str = ADMIN_USER, *, dry_runs: bool = False) -> list[dict[str, Any]]:
        """Mutating requests `user` sent after the `audit_mark` value `since`; server-side dry runs
        (which persist nothing) only when `dry_runs` is set."""
        events = self.audit_events(since)
        return [
            e for e in events
            if e.get("verb") in MUTATING and e.get("user", {}).get("username") == user
            and e.get("stage") == "ResponseComplete"
            and (dry_runs or "dryRun=All" not in e.get("requestURI", ""))
            and (e.get("objectRef") or {}).get("resource") not in REVIEWS
        ]

    def plugin_hash(self) -> str | None:
        """The operator's last-applied hash on the device-plugin DaemonSet (None if it has none)."""
        try:
            ds = self.apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", self.operator_namespace)
        except client.exceptions.ApiException as err:
            if err.status == 404:
                return None
            raise
        return (ds.metadata.annotations or {}).get("nvidia.com/last-applied-hash")

    def wait_plugin_rolled_out(self, timeout_s: float = 60) -> None:
        def rolled_out() -> bool:
            ds = self.apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", self.operator_namespace)
            s = ds.status
            return (ds.metadata.generation == s.observed_generation
                    and (s.desired_number_scheduled or 0) == (s.updated_number_scheduled or 0) == (s.number_ready or 0))

        wait_for(rolled_out, timeout_s, "the device-plugin DaemonSet rollout")


def embedded_cluster(state_dir: Path, *options: str) -> Cluster:
    """Start (or reuse) the embedded cluster in `state_dir` (`options`: more of `gpushare sim up`'s)."""
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(state_dir)}
    subprocess.run([sys.executable, "-m", "gpushare", "sim", "up", *options], check=True, env=env, timeout=900)
    info = json.loads((state_dir / "cluster.json").read_text())
    return Cluster(
        kubeconfig=state_dir / "kubeconfig",
        inventory=REPO / "inventories" / "sim",
        operator_namespace=info["operator_namespace"],
        state_dir=state_dir,
        bin_dir=Path(info["bin_dir"]),
        runbook_kubeconfig=state_dir / "kubeconfigs" / "runbook.yaml",
    )


TEST_NAMESPACE_LABEL = "gpushare.test/scenario"
# The scenarios' workloads run a shell that ignores SIGTERM, so their deletion (an eviction, a
# namespace's) takes their whole grace period, as KWOK's pod-delete stage honours it: short enough
# to keep the suite quick, long enough that a drain which does not wait for it fails.
WORKLOAD_GRACE_S = 2
# Node labels, annotations and taints the runbooks (or scenarios) may leave behind.
SCENARIO_LABEL_KEYS = ("nvidia.com/device-plugin.config", "gpu-mode", "nvidia.com/gpu-driver-upgrade.skip",
                       "nvidia.com/dra-kubelet-plugin")
DRA_CHECK_LABEL = "gpushare.io/dra-pilot-check"  # the DRA pilot verify's claim and pods (share check namespace)
DRA_PILOT_CLASS = "gpu-pilot.gpushare.io"
SCENARIO_ANNOTATION_PREFIXES = ("gpushare.io/", "sim.gpushare.io/mig-reboot", "sim.gpushare.io/mig-stall",
                                "sim.gpushare.io/mig-client-timeout", "sim.gpushare.io/mig-discovery",
                                "sim.gpushare.io/device-plugin-fault", "sim.gpushare.io/endpoint-stop-grace",
                                "sim.gpushare.io/xid-gpus", "sim.gpushare.io/device-plugin-zero-starts")
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
RESET_TIMEOUT_S = 120


def _node_patch(node: Any) -> dict[str, Any] | None:
    """What puts a node back as the fleet registered it and the operator labelled it."""
    labels = node.metadata.labels or {}
    annotations = node.metadata.annotations or {}
    label_patch: dict[str, Any] = {k: None for k in SCENARIO_LABEL_KEYS if k in labels}
    # a deploy label a scenario turned off comes back as the operator sets it ("true"); one a MIG
    # manager or a driver manager paused is theirs to restore
    label_patch.update({k: None for k, v in labels.items()
                        if k.startswith(DEPLOY_LABEL_PREFIX) and v != "true" and "paused-for-" not in v})
    if labels.get("nvidia.com/mig.config", "all-disabled") != "all-disabled":
        label_patch["nvidia.com/mig.config"] = "all-disabled"
    patch: dict[str, Any] = {"metadata": {
        "labels": label_patch,
        "annotations": {k: None for k in annotations if k.startswith(SCENARIO_ANNOTATION_PREFIXES)},
    }}
    taints = [t for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/") and t.key != "node.kubernetes.io/unschedulable"]
    if node.spec.unschedulable or len(taints) != len(node.spec.taints or []):
        patch["spec"] = {"unschedulable": None, "taints": [t.to_dict() for t in taints] or None}
    return patch if any(patch["metadata"].values()) or "spec" in patch else None


def delete_dra_pilot_objects(cluster: Cluster) -> None:
    """The DRA pilot's verify claim and pods (in the share check's namespace, its default), and its
    DeviceClass: what its enable leaves for the rollback."""
    namespace = "gpushare-share-check"
    cluster.core.delete_collection_namespaced_pod(namespace, label_selector=DRA_CHECK_LABEL, grace_period_seconds=0)
    cluster.custom.delete_collection_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims",
                                                              label_selector=DRA_CHECK_LABEL)
    try:
        cluster.custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", DRA_PILOT_CLASS)
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise


def reset_embedded(cluster: Cluster) -> None:
    """Put the embedded cluster back to its freshly started state between scenarios: the chart's
    ClusterPolicy and no GPUCluster, no scenario objects, every operand rolled out and every GPU node whole."""
    from gpushare_testbed.simulator import clusterpolicy as cp

    core = cluster.core
    delete_test_namespaces(cluster, TEST_NAMESPACE_LABEL)
    delete_dra_pilot_objects(cluster)
    coordination = client.CoordinationV1Api(cluster.api)
    for ns in (cluster.operator_namespace, cluster.records_namespace):
        for cm in core.list_namespaced_config_map(ns).items:
            # the operator's, and the configs a MIG manager generated from its node's GPUs (owned by its pod)
            owned = any(o.kind in ("ClusterPolicy", "Pod") for o in cm.metadata.owner_references or [])
            if cm.metadata.name not in ("kube-root-ca.crt", WRITE_MODEL) and not owned:
                core.delete_namespaced_config_map(cm.metadata.name, ns)
        for lease in coordination.list_namespaced_lease(ns).items:
            coordination.delete_namespaced_lease(lease.metadata.name, ns)
    try:  # the GPUCluster CRD comes with operator v26.7: an older operator's cluster serves none
        gpuclusters = cluster.custom.list_cluster_custom_object(cp.GROUP, cp.GPUCLUSTER_VERSION, cp.GPUCLUSTER_PLURAL)["items"]
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise
        gpuclusters = []
    for gpucluster in gpuclusters:
        cluster.custom.delete_cluster_custom_object(cp.GROUP, cp.GPUCLUSTER_VERSION, cp.GPUCLUSTER_PLURAL,
                                                    gpucluster["metadata"]["name"])
    try:
        policy = cluster.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise
        policy = cluster.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.default_instance())
    if policy["spec"] != cp.default_instance()["spec"]:
        # a JSON patch carries no resourceVersion: the simulator's status writes cannot conflict with it
        replace_spec = [{"op": "replace", "path": "/spec", "value": cp.default_instance()["spec"]}]
        policy = cluster.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY,
                                                            replace_spec, _content_type="application/json-patch+json")
    for node in core.list_node().items:
        patch = _node_patch(node)
        if patch:
            core.patch_node(node.metadata.name, patch)
    wait_operator_settled(cluster, policy, "the embedded cluster to be reset",
                          lambda: not core.list_namespace(label_selector=TEST_NAMESPACE_LABEL).items)


def wait_operator_settled(cluster: Cluster, policy: dict[str, Any], what: str,
                          also: Callable[[], bool] = lambda: True) -> None:
    """The simulated operator has rendered `policy` and everything has settled (every operand rolled
    out, every GPU node whole), and `also` holds."""
    from gpushare_testbed.cluster_bootstrap import settled_problems
    from gpushare_testbed.simulator.operands import HASH_ANNOTATION, expected_hashes
    from gpushare_testbed.simulator.rest import Rest

    ns = cluster.operator_namespace
    wanted = expected_hashes(policy, ns)
    rest = Rest(cluster.api)

    def settled() -> bool:
        if not also():
            return False
        daemonsets = {d.metadata.name: (d.metadata.annotations or {}).get(HASH_ANNOTATION)
                      for d in cluster.apps.list_namespaced_daemon_set(ns).items}
        # the operator re-renders asynchronously: until it has, the old DaemonSets look rolled out
        return daemonsets == wanted and not settled_problems(rest, ns)

    try:
        wait_for(settled, RESET_TIMEOUT_S, what, interval_s=0.2)
    except TimeoutError as err:
        raise TimeoutError(f"{err}; still waiting for: {settled_problems(rest, ns)}") from None
