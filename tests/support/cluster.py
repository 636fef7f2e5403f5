"""The cluster under test: the embedded one (started once per session) or any cluster given by a
kubeconfig and an inventory. Scenarios talk to it only through this object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from gpushare.kube import api_client, wait_for

REPO = Path(__file__).resolve().parents[2]
ADMIN_USER = "gpushare-admin"
MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
# "create" requests that only ask a question and persist nothing.
REVIEWS = ("selfsubjectreviews", "selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews")


@dataclass
class Cluster:
    kubeconfig: Path
    inventory: Path
    operator_namespace: str = "gpu-operator"
    state_dir: Path | None = None  # set for the embedded cluster only
    bin_dir: Path | None = None
    _api: Any = field(default=None, repr=False)

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

    def audit_writes(self, since: int, user: str = ADMIN_USER, *, dry_runs: bool = False) -> list[dict[str, Any]]:
        """Mutating requests `user` sent after the `audit_mark` value `since`; server-side dry runs
        (which persist nothing) only when `dry_runs` is set."""
        if not self.state_dir:
            raise RuntimeError("the audit log is only available on the embedded cluster")
        with (self.state_dir / "audit.log").open() as log:
            log.seek(since)
            events = [json.loads(line) for line in log if line.strip()]
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


def embedded_cluster(state_dir: Path) -> Cluster:
    """Start (or reuse) the embedded cluster in `state_dir`."""
    env = {**os.environ, "GPUSHARE_STATE_DIR": str(state_dir)}
    subprocess.run([sys.executable, "-m", "gpushare", "sim", "up"], check=True, env=env, timeout=900)
    info = json.loads((state_dir / "cluster.json").read_text())
    return Cluster(
        kubeconfig=state_dir / "kubeconfig",
        inventory=REPO / "inventories" / "sim",
        operator_namespace=info["operator_namespace"],
        state_dir=state_dir,
        bin_dir=Path(info["bin_dir"]),
    )


TEST_NAMESPACE_LABEL = "gpushare.test/scenario"
# Node labels, annotations and taints the runbooks (or scenarios) may leave behind.
SCENARIO_LABEL_KEYS = ("nvidia.com/device-plugin.config", "gpu-mode")
SCENARIO_ANNOTATION_PREFIX = "gpushare.io/"


def reset_embedded(cluster: Cluster) -> None:
    """Put the embedded cluster back to its freshly started state between scenarios."""
    from gpushare.simulator import clusterpolicy as cp  # noqa: PLC0415

    core = cluster.core
    for ns in core.list_namespace(label_selector=TEST_NAMESPACE_LABEL).items:
        core.delete_namespace(ns.metadata.name)
    for cm in core.list_namespaced_config_map(cluster.operator_namespace).items:
        if cm.metadata.name != "kube-root-ca.crt":
            core.delete_namespaced_config_map(cm.metadata.name, cluster.operator_namespace)
    coordination = client.CoordinationV1Api(cluster.api)
    for lease in coordination.list_namespaced_lease(cluster.operator_namespace).items:
        coordination.delete_namespaced_lease(lease.metadata.name, cluster.operator_namespace)
    try:
        policy = cluster.custom.get_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY)
    except client.exceptions.ApiException as err:
        if err.status != 404:
            raise
        policy = cluster.custom.create_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.default_instance())
    if policy["spec"] != cp.default_instance()["spec"]:
        before = cluster.plugin_hash()
        policy["spec"] = cp.default_instance()["spec"]
        cluster.custom.replace_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, policy)
        # The operator re-renders the DaemonSet asynchronously: until it has, the old one looks rolled out.
        wait_for(lambda: cluster.plugin_hash() != before, 30, "the operator to re-render the device-plugin DaemonSet")
    for node in core.list_node().items:
        labels = node.metadata.labels or {}
        annotations = node.metadata.annotations or {}
        patch: dict[str, Any] = {"metadata": {
            "labels": {k: None for k in SCENARIO_LABEL_KEYS if k in labels},
            "annotations": {k: None for k in annotations if k.startswith(SCENARIO_ANNOTATION_PREFIX)},
        }}
        if labels.get("nvidia.com/mig.config", "all-disabled") != "all-disabled":
            patch["metadata"]["labels"]["nvidia.com/mig.config"] = "all-disabled"
        taints = [t for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/") and t.key != "node.kubernetes.io/unschedulable"]
        if node.spec.unschedulable or len(taints) != len(node.spec.taints or []):
            patch["spec"] = {"unschedulable": None, "taints": [t.to_dict() for t in taints] or None}
        if any(patch["metadata"].values()) or "spec" in patch:
            core.patch_node(node.metadata.name, patch)
    wait_for(lambda: not core.list_namespace(label_selector=TEST_NAMESPACE_LABEL).items, 60,
             "scenario namespaces to be deleted")
    cluster.wait_plugin_rolled_out()

    def whole_cards() -> bool:
        for node in core.list_node(label_selector="nvidia.com/gpu.present=true").items:
            labels = node.metadata.labels
            if labels.get("nvidia.com/gpu.replicas") != "1" or labels.get("nvidia.com/mig.config.state", "success") != "success":
                return False
            if "nvidia.com/gpu.shared" in (node.status.allocatable or {}):
                return False
        return True

    wait_for(whole_cards, 60, "every GPU node to advertise whole cards again")
