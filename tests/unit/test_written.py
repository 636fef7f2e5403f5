"""What a run wrote, read as the difference between two states of the objects the runbooks may
write: controllers' own changes are not writes, a runbook's are, named by object and field."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.written import content, differences


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-node", "uid": "n-1", "resourceVersion": "10", "managedFields": [{"manager": "kwok"}],
                     "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gfd.timestamp": "1700000000",
                                "nvidia.com/gpu.replicas": "1", "nvidia.com/mig.config.state": "success"},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
                   "allocatable": {"nvidia.com/gpu": "1"}},
    }


def state(*objs: tuple[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{kind} {obj['metadata']['name']}": content(kind, obj) for kind, obj in objs}


def test_what_controllers_change_on_their_own_is_no_write() -> None:
    later = node()
    later["metadata"].update(resourceVersion="11", managedFields=[])
    later["metadata"]["labels"].update({"nvidia.com/gfd.timestamp": "1700000060", "nvidia.com/gpu.replicas": "4",
                                        "nvidia.com/mig.config.state": "pending"})
    later["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "15"
    later["spec"]["taints"] = []
    later["status"] = {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:01:00Z"}]}
    assert differences(state(("Node", node())), state(("Node", later))) == []


def test_a_label_a_taint_and_a_cordon_are_named_by_node_and_field() -> None:
    later = node()
    later["spec"]["unschedulable"] = True
    later["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "shared"
    later["spec"]["taints"].append({"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"})
    assert differences(state(("Node", node())), state(("Node", later))) == [
        "Node gpu-node: labels.nvidia.com/device-plugin.config: None -> 'shared'",
        "Node gpu-node: taints: [] -> [{'key': 'gpu-mode', 'value': 'shared', 'effect': 'NoSchedule'}]",
        "Node gpu-node: unschedulable: False -> True",
    ]


def test_a_clusterpolicy_spec_change_is_named_its_status_is_not() -> None:
    policy = {"metadata": {"name": "cluster-policy", "uid": "p", "generation": 1},
              "spec": {"devicePlugin": {"config": {"name": "", "default": ""}}}, "status": {"state": "ready"}}
    later = copy.deepcopy(policy)
    later["metadata"]["generation"] = 2
    later["status"] = {"state": "notReady"}
    assert differences(state(("ClusterPolicy", policy)), state(("ClusterPolicy", later))) == []
    later["spec"]["devicePlugin"]["config"]["name"] = "time-slicing-config"
    assert differences(state(("ClusterPolicy", policy)), state(("ClusterPolicy", later))) == [
        "ClusterPolicy cluster-policy: spec.devicePlugin.config.name: '' -> 'time-slicing-config'"]


def test_a_lease_heartbeat_is_no_write_a_takeover_is() -> None:
    lease = {"metadata": {"name": "gpushare-runbook-lock", "uid": "l"},
             "spec": {"holderIdentity": "enable@a", "renewTime": "2026-01-01T00:00:00.000000Z"}}
    renewed = copy.deepcopy(lease)
    renewed["spec"]["renewTime"] = "2026-01-01T00:00:10.000000Z"
    assert differences(state(("Lease", lease)), state(("Lease", renewed))) == []
    renewed["spec"]["holderIdentity"] = "rollback@b"
    assert differences(state(("Lease", lease)), state(("Lease", renewed))) == [
        "Lease gpushare-runbook-lock: spec.holderIdentity: 'enable@a' -> 'rollback@b'"]


def test_created_deleted_and_recreated_objects() -> None:
    configmap = {"metadata": {"name": "time-slicing-config", "uid": "c-1"}, "data": {"shared": "v1"}}
    recreated = {**configmap, "metadata": {**configmap["metadata"], "uid": "c-2"}}
    pod = {"metadata": {"name": "nvidia-device-plugin-daemonset-x", "uid": "p-1"}, "status": {"phase": "Running"}}
    before = state(("ConfigMap", configmap), ("Pod", pod))
    assert differences(before, state(("ConfigMap", recreated))) == [
        "ConfigMap time-slicing-config: metadata.uid: 'c-1' -> 'c-2'",
        "Pod nvidia-device-plugin-daemonset-x was deleted",
    ]
    assert differences({}, state(("ConfigMap", configmap))) == ["ConfigMap time-slicing-config was created"]


def test_a_configmap_data_change_is_named_by_key() -> None:
    configmap = {"metadata": {"name": "time-slicing-config", "uid": "c", "resourceVersion": "1"},
                 "data": {"any": "a", "shared": "v1"}}
    later = {"metadata": {**configmap["metadata"], "resourceVersion": "2"}, "data": {"any": "a", "shared": "v2"}}
    assert differences(state(("ConfigMap", configmap)), state(("ConfigMap", later))) == [
        "ConfigMap time-slicing-config: data.shared: 'v1' -> 'v2'"]
