"""Unit tests of roles/timeslicing_rollback/filter_plugins/timeslicing_rollback.py (behaviour only)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.filters import load_plugin

_module = load_plugin("roles/timeslicing_rollback/filter_plugins/timeslicing_rollback.py")
F = _module.FilterModule().filters()

blocking_budgets = F["timeslicing_rollback_blocking_budgets"]
fingerprint = F["timeslicing_rollback_fingerprint"]
whereabouts = F["timeslicing_rollback_whereabouts"]
node_state = F["timeslicing_rollback_node_state"]
newest_backup = F["timeslicing_rollback_newest_backup"]
spec_patch = F["timeslicing_rollback_spec_patch"]
shared_pods_on_nodes = F["timeslicing_rollback_shared_pods_on_nodes"]
changed_nodes = F["timeslicing_rollback_changed_nodes"]
not_rolled_back = F["timeslicing_rollback_not_rolled_back"]
report_row = F["timeslicing_rollback_report_row"]
host_nodes = F["timeslicing_rollback_host_nodes"]
whereabouts_lines = F["timeslicing_rollback_whereabouts_lines"]
evict_label_patches = F["timeslicing_rollback_evict_label_patches"]

SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"


def test_filter_names() -> None:
    assert len(F) == 13 and all(name.startswith("timeslicing_rollback_") for name in F)


# --- pods ----------------------------------------------------------------------------------------

def container(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": "c", "resources": resources}


def pod(name: str = "p", namespace: str = "ml", containers: list[dict[str, Any]] | None = None,
        init: list[dict[str, Any]] | None = None, node: str | None = "gpu-1", phase: str = "Running",
        owner: tuple[str, str] | None = ("ReplicaSet", "train-abc"), labels: dict[str, str] | None = None,
        deleting: bool = False, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": containers if containers is not None else [container({SHARED: 1})]}
    if init is not None:
        spec["initContainers"] = init
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": conditions or []}}


def shared_pods(pods: list[dict[str, Any]], resources: list[str]) -> list[dict[str, Any]]:
    """shared_pods through its filter: one k8s_info result for a node with this resource list."""
    state = {"strategy": "time-slicing", "shared_allocatable": 4 if resources == [SHARED] else 0}
    assert _module.state_resources(state) == resources
    return shared_pods_on_nodes([{"item": state, "resources": pods}])


@pytest.mark.parametrize("p, resources, expected", [
    pytest.param(pod(), [SHARED], {SHARED: 1}, id="limit on shared"),
    pytest.param(pod(containers=[container(requests={SHARED: "2"})]), [SHARED], {SHARED: 2}, id="request only"),
    pytest.param(pod(containers=[container(limits={SHARED: "3"}, requests={SHARED: "1"})]), [SHARED], {SHARED: 3},
                 id="limit wins over request"),
    pytest.param(pod(containers=[container(limits={SHARED: 0}, requests={SHARED: 1})]), [SHARED], None,
                 id="limit 0 wins: not shared"),
    pytest.param(pod(containers=[container({GPU: 1})]), [SHARED], None, id="whole gpu on a renamed node"),
    pytest.param(pod(containers=[container({GPU: 1})]), [SHARED, GPU], {GPU: 1}, id="gpu on node sharing unrenamed"),
    pytest.param(pod(containers=[container({"cpu": "1"}), {"name": "bare"}]), [SHARED, GPU], None, id="no gpu"),
    pytest.param(pod(containers=[container({SHARED: 1}), container({SHARED: 1})]), [SHARED], {SHARED: 2},
                 id="containers summed"),
    pytest.param(pod(containers=[container({"cpu": "1"})], init=[container({SHARED: 1})]), [SHARED], {SHARED: 1},
                 id="init container alone holds it"),
    pytest.param(pod(containers=[container({SHARED: 1})], init=[container({SHARED: 1})]), [SHARED], {SHARED: 1},
                 id="init replica reused by the app container"),
    pytest.param(pod(containers=[container({SHARED: 1})], init=[container({SHARED: 3})]), [SHARED], {SHARED: 3},
                 id="largest init container counts"),
    pytest.param(pod(phase="Succeeded"), [SHARED], None, id="succeeded holds nothing"),
    pytest.param(pod(phase="Failed"), [SHARED], None, id="failed holds nothing"),
    pytest.param(pod(phase="Pending"), [SHARED], {SHARED: 1}, id="pending still counted"),
])
def test_shared_pod_detection(p: dict[str, Any], resources: list[str], expected: dict[str, int] | None) -> None:
    found = shared_pods([p], resources)
    assert [f["requests"] for f in found] == ([expected] if expected else [])


def test_shared_pod_record() -> None:
    p = pod("train-abc-1", labels={"app": "train", "gpushare.io/evict": "rollback-timeslicing"}, deleting=True)
    assert shared_pods([p], [SHARED]) == [{
        "namespace": "ml", "name": "train-abc-1", "node": "gpu-1", "owner_kind": "ReplicaSet", "owner_name": "train-abc",
        "daemonset": False, "terminating": True, "requests": {SHARED: 1},
        "labels": {"app": "train", "gpushare.io/evict": "rollback-timeslicing"}, "marked": True}]


@pytest.mark.parametrize("refs, kind, name", [
    pytest.param(None, "", "", id="no owner"),
    pytest.param([{"kind": "DaemonSet", "name": "ds", "controller": True}], "DaemonSet", "ds", id="daemonset"),
    pytest.param([{"kind": "ConfigMap", "name": "cm", "controller": False},
                  {"kind": "Job", "name": "j", "controller": True}], "Job", "j", id="controller ref wins"),
    pytest.param([{"kind": "ConfigMap", "name": "cm"}], "", "", id="ref without controller is no controller"),
])
def test_shared_pod_owner(refs: list[dict[str, Any]] | None, kind: str, name: str) -> None:
    p = pod(owner=None)
    if refs is not None:
        p["metadata"]["ownerReferences"] = refs
    found = shared_pods([p], [SHARED])[0]
    assert (found["owner_kind"], found["owner_name"], found["daemonset"]) == (kind, name, kind == "DaemonSet")


def test_shared_pod_marks() -> None:
    found = shared_pods([pod(labels={"gpushare.io/evict": "someone-else"})], [SHARED])[0]
    assert (found["marked"], found["terminating"]) == (False, False)


def test_shared_pods_on_nodes_skips_skipped_results_and_uses_each_nodes_resources() -> None:
    renamed = {"strategy": "time-slicing", "shared_allocatable": 8}
    unrenamed = {"strategy": "time-slicing", "shared_allocatable": 0}
    whole = pod("whole", containers=[container({GPU: 1})])
    results = [
        {"item": renamed, "resources": [whole, pod("a")]},
        {"item": unrenamed, "resources": [pod("b", containers=[container({GPU: 1})])]},
        {"item": renamed, "skipped": True, "resources": [pod("c")]},
        {"item": {"strategy": "none", "shared_allocatable": 0}, "resources": [pod("d", containers=[container({GPU: 1})])]},
    ]
    assert [p["name"] for p in shared_pods_on_nodes(results)] == ["a", "b"]
    assert shared_pods_on_nodes(None) == []


# --- PodDisruptionBudgets ------------------------------------------------------------------------

def pdb(selector: Any, namespace: str = "ml", name: str = "train-pdb", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec)
    if selector != "absent":
        body["selector"] = selector
    return {"metadata": {"name": name, "namespace": namespace}, "spec": body,
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}}


TRAIN = {"namespace": "ml", "name": "train-1", "labels": {"app": "train", "tier": "gpu"}}
OTHER = {"namespace": "ml", "name": "web-1", "labels": {"app": "web"}}


@pytest.mark.parametrize("selector, protects", [
    pytest.param({"matchLabels": {"app": "train"}}, True, id="matchLabels match"),
    pytest.param({"matchLabels": {"app": "train", "tier": "cpu"}}, False, id="matchLabels all must match"),
    pytest.param({"matchLabels": {"missing": "x"}}, False, id="matchLabels key missing"),
    pytest.param({}, True, id="empty selector selects every pod"),
    pytest.param(None, False, id="null selector selects nothing"),
    pytest.param("absent", False, id="absent selector selects nothing"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "In", "values": ["train", "x"]}]}, True, id="In"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}, False, id="In miss"),
    pytest.param({"matchExpressions": [{"key": "nope", "operator": "In", "values": ["x"]}]}, False, id="In key missing"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["train"]}]}, False, id="NotIn hit"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, True, id="NotIn miss"),
    pytest.param({"matchExpressions": [{"key": "nope", "operator": "NotIn", "values": ["x"]}]}, True,
                 id="NotIn key missing matches"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True, id="Exists"),
    pytest.param({"matchExpressions": [{"key": "nope", "operator": "Exists"}]}, False, id="Exists miss"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False, id="DoesNotExist hit"),
    pytest.param({"matchExpressions": [{"key": "nope", "operator": "DoesNotExist"}]}, True, id="DoesNotExist miss"),
    pytest.param({"matchLabels": {"app": "train"},
                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["cpu"]}]}, False,
                 id="labels and expressions are ANDed"),
])
def test_pdb_selector(selector: Any, protects: bool) -> None:
    found = blocking_budgets([pdb(selector, minAvailable=1)], [TRAIN])
    assert [b["pods"] for b in found] == ([["ml/train-1"]] if protects else [])


def test_pdb_only_protects_pods_of_its_namespace() -> None:
    other_ns = dict(TRAIN, namespace="prod")
    assert blocking_budgets([pdb({"matchLabels": {"app": "train"}}, minAvailable=1)], [other_ns]) == []
    assert blocking_budgets([pdb({}, namespace="prod", minAvailable=1)], [TRAIN, other_ns, OTHER])[0]["pods"] == ["prod/train-1"]


def test_pdb_record_and_text() -> None:
    budget = pdb({"matchLabels": {}}, minAvailable="50%")
    budget["status"] = {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2}
    assert blocking_budgets([budget], [TRAIN, OTHER]) == [{
        "budget": "ml/train-pdb", "pods": ["ml/train-1", "ml/web-1"], "rule": "minAvailable 50%",
        "disruptions_allowed": 0, "current_healthy": 2, "desired_healthy": 2,
        "text": "PodDisruptionBudget ml/train-pdb (minAvailable 50%, 2 healthy of 2 needed, disruptionsAllowed 0) "
                "protects ml/train-1, ml/web-1"}]


def test_pdb_max_unavailable_and_missing_status() -> None:
    budget = pdb({"matchLabels": {"app": "web"}}, maxUnavailable=0)
    del budget["status"]
    (found,) = blocking_budgets([budget, pdb({"matchLabels": {"app": "zzz"}}, name="unrelated", minAvailable=1)],
                                [TRAIN, OTHER])
    assert (found["rule"], found["pods"], found["disruptions_allowed"]) == ("maxUnavailable 0", ["ml/web-1"], 0)
    assert found["text"].startswith("PodDisruptionBudget ml/train-pdb (maxUnavailable 0, 0 healthy of 0 needed,")


@pytest.mark.parametrize("budgets, pods", [(None, [TRAIN]), ([pdb({})], None), ([], [])])
def test_pdb_empty_inputs(budgets: Any, pods: Any) -> None:
    assert blocking_budgets(budgets, pods) == []


# --- nodes ---------------------------------------------------------------------------------------

def node(name: str = "gpu-1", labels: dict[str, str] | None = None, allocatable: dict[str, Any] | None = None,
         annotations: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    base = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none"}
    base.update(labels or {})
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": {k: v for k, v in base.items() if v is not None},
                         "annotations": annotations or {}},
            "spec": spec, "status": {"allocatable": allocatable if allocatable is not None else {"cpu": "4", GPU: "2"}}}


MARK = json.dumps({"configmap": "time-slicing-config", "key": "ts4", "scope": "node", "replicas": 4})
SHARING = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
           "nvidia.com/device-plugin.config": "ts4", "gpu-mode": "shared"}
POOL_TAINT = {"key": "gpu-mode", "value": "shared", "effect": "NoSchedule"}


def state(n: dict[str, Any]) -> dict[str, Any]:
    return node_state(n, "gpu-mode", "shared", "shared")


def test_node_state_of_a_node_left_shared_by_the_enable_runbook() -> None:
    n = node(labels=SHARING, allocatable={GPU: "0", SHARED: "8"}, taints=[POOL_TAINT], unschedulable=True,
             annotations={"gpushare.io/timeslicing": MARK, "gpushare.io/cordoned-by": "rollback-timeslicing"})
    assert state(n) == {
        "name": "gpu-1", "gpu": True,
        "mark": {"configmap": "time-slicing-config", "key": "ts4", "scope": "node", "replicas": 4},
        "key": "ts4", "configmap": "time-slicing-config", "scope": "node", "config_label": "ts4",
        "pool_label": True, "pool_taint": True, "shared_allocatable": 8, "gpu_allocatable": 0, "gpu_count": "2",
        "replicas": "4", "strategy": "time-slicing", "mig_strategy": "", "unschedulable": True,
        "cordoned_by_us": True, "shared": True, "pending": True, "whole_cards": False}


def test_node_state_of_a_whole_card_node() -> None:
    s = state(node())
    assert {k: s[k] for k in ("mark", "key", "configmap", "scope", "shared", "pending", "whole_cards", "pool_label",
                              "pool_taint", "cordoned_by_us", "gpu_allocatable")} == {
        "mark": {}, "key": "shared", "configmap": "", "scope": "", "shared": False, "pending": False,
        "whole_cards": True, "pool_label": False, "pool_taint": False, "cordoned_by_us": False, "gpu_allocatable": 2}


@pytest.mark.parametrize("n, shared", [
    pytest.param(node(labels={"nvidia.com/device-plugin.config": "shared"}), True, id="config label = fallback key"),
    pytest.param(node(labels={"nvidia.com/device-plugin.config": "other"}), False, id="other config label"),
    pytest.param(node(allocatable={GPU: "0", SHARED: "1"}), True, id="shared allocatable"),
    pytest.param(node(labels={"nvidia.com/gpu.sharing-strategy": "mps"}), True, id="mps strategy"),
    pytest.param(node(labels={"nvidia.com/gpu.sharing-strategy": None}), False, id="no strategy label"),
    pytest.param(node(annotations={"gpushare.io/timeslicing": "not json"}), True, id="unreadable mark still a mark"),
])
def test_node_state_shared(n: dict[str, Any], shared: bool) -> None:
    assert state(n)["shared"] is shared


@pytest.mark.parametrize("raw, mark", [
    ("not json", {"unreadable": "not json"}),
    ("[1, 2]", {"unreadable": "[1, 2]"}),
    ("", {}),
    ('{"key": "k"}', {"key": "k"}),
])
def test_node_state_mark_parsing(raw: str, mark: dict[str, Any]) -> None:
    assert state(node(annotations={"gpushare.io/timeslicing": raw}))["mark"] == mark


@pytest.mark.parametrize("n, pool_taint", [
    (node(taints=[POOL_TAINT]), True),
    (node(taints=[dict(POOL_TAINT, effect="NoExecute")]), False),
    (node(taints=[dict(POOL_TAINT, value="other")]), False),
    (node(taints=[{"key": "gpu-mode", "effect": "NoSchedule"}]), False),
])
def test_node_state_pool_taint(n: dict[str, Any], pool_taint: bool) -> None:
    assert state(n)["pool_taint"] is pool_taint


@pytest.mark.parametrize("n, whole", [
    pytest.param(node(), True, id="gpu allocatable = count"),
    pytest.param(node(allocatable={GPU: "1"}), False, id="gpu allocatable below count"),
    pytest.param(node(allocatable={GPU: "8"}, labels={"nvidia.com/gpu.replicas": "4"}), False, id="replicas 4"),
    pytest.param(node(allocatable={"nvidia.com/mig-1g.10gb": "7"}, labels={"nvidia.com/mig.strategy": "mixed"}), True,
                 id="mixed MIG skips the gpu count"),
    pytest.param(node(labels={"nvidia.com/gpu.replicas": None}), True, id="no replicas label means 1"),
])
def test_node_state_whole_cards(n: dict[str, Any], whole: bool) -> None:
    assert state(n)["whole_cards"] is whole


def test_node_state_cordoned_by_someone_else_is_not_pending() -> None:
    s = state(node(unschedulable=True, annotations={"gpushare.io/cordoned-by": "admin"}))
    assert (s["unschedulable"], s["cordoned_by_us"], s["pending"]) == (True, False, False)


def test_node_state_cordoned_by_us_is_pending() -> None:
    s = state(node(unschedulable=True, annotations={"gpushare.io/cordoned-by": "rollback-timeslicing"}))
    assert (s["shared"], s["pending"]) == (False, True)


def test_fingerprint() -> None:
    n = node(annotations={"gpushare.io/timeslicing": MARK, "other.io/x": "y"},
             allocatable={"cpu": "4", GPU: 2, SHARED: "0"}, taints=[POOL_TAINT, {"key": "a", "value": None, "effect": "NoExecute"}],
             unschedulable=True)
    assert fingerprint(n) == {
        "labels": {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.replicas": "1",
                   "nvidia.com/gpu.sharing-strategy": "none"},
        "annotations": {"gpushare.io/timeslicing": MARK},
        "allocatable": {GPU: "2", SHARED: "0"},
        "taints": ["a=:NoExecute", "gpu-mode=shared:NoSchedule"],
        "unschedulable": True}


def test_changed_nodes() -> None:
    recorded = {"a": fingerprint(node("a")), "b": fingerprint(node("b")), "gone": fingerprint(node("gone"))}
    now = [node("a"),
           node("b", labels={"gpu-mode": "shared"}, allocatable={GPU: "8"}, taints=[POOL_TAINT], unschedulable=True,
                annotations={"gpushare.io/cordoned-by": "rollback-timeslicing", "ignored.io/x": "1"})]
    assert changed_nodes(recorded, now) == [
        "b: labels gpu-mode: None -> 'shared'; annotations gpushare.io/cordoned-by: None -> 'rollback-timeslicing'; "
        "allocatable nvidia.com/gpu: '2' -> '8'; taints [] -> ['gpu-mode=shared:NoSchedule']; unschedulable False -> True",
        "gone: gone"]
    assert changed_nodes(None, now) == []


def test_not_rolled_back() -> None:
    done = state(node("done"))
    left = state(node("left", labels=SHARING, allocatable={GPU: "0", SHARED: "8"}, taints=[POOL_TAINT],
                      annotations={"gpushare.io/timeslicing": MARK}))
    mixed = state(node("mig", labels={"nvidia.com/mig.strategy": "mixed"}, allocatable={}))
    assert not_rolled_back([done, left, mixed], ["ts4"]) == [
        "left: nvidia.com/gpu.shared allocatable 8, nvidia.com/gpu.replicas 4, nvidia.com/gpu.sharing-strategy "
        "time-slicing, nvidia.com/gpu allocatable 0, physical 2, shared-pool label, shared-pool taint, "
        "nvidia.com/device-plugin.config=ts4, gpushare.io/timeslicing annotation"]


def test_not_rolled_back_config_label_only_counts_for_our_keys() -> None:
    s = state(node(labels={"nvidia.com/device-plugin.config": "custom"}))
    assert not_rolled_back([s], ["ts4", "shared"]) == []
    assert not_rolled_back([s], ["custom"]) == ["gpu-1: nvidia.com/device-plugin.config=custom"]
    assert not_rolled_back([s], None) == []


# --- ClusterPolicy restore patch -----------------------------------------------------------------

BACKUP = {
    "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    "devicePlugin": {"enabled": True},
    "driver": {"enabled": True},
}
ENABLED = {
    "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                   {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]},
    "devicePlugin": {"enabled": True, "config": {"name": "time-slicing-config", "default": "shared"}},
    "driver": {"enabled": True},
}


def test_spec_patch_restores_only_differing_top_level_fields_whole() -> None:
    assert spec_patch(ENABLED, BACKUP) == [
        {"op": "replace", "path": "/spec/daemonsets", "value": BACKUP["daemonsets"]},
        {"op": "replace", "path": "/spec/devicePlugin", "value": {"enabled": True}}]


@pytest.mark.parametrize("current, wanted, expected", [
    pytest.param(BACKUP, BACKUP, [], id="equal: nothing"),
    pytest.param({**BACKUP, "mig": {"strategy": "mixed"}}, BACKUP, [{"op": "remove", "path": "/spec/mig"}],
                 id="added field removed"),
    pytest.param(BACKUP, {**BACKUP, "mig": {"strategy": "single"}},
                 [{"op": "add", "path": "/spec/mig", "value": {"strategy": "single"}}], id="missing field added"),
    pytest.param({"x": [1, 2, 3]}, {"x": [3, 2, 1]}, [{"op": "replace", "path": "/spec/x", "value": [3, 2, 1]}],
                 id="list order matters"),
    pytest.param({"a/b": 1, "c~d": 1}, {"a/b": 2}, [{"op": "replace", "path": "/spec/a~1b", "value": 2},
                                                  {"op": "remove", "path": "/spec/c~0d"}], id="JSON pointer escaping"),
    pytest.param({"~/": 1}, {"~/": 2}, [{"op": "replace", "path": "/spec/~0~1", "value": 2}], id="escape ~ before /"),
    pytest.param(None, {"b": 1, "a": None}, [{"op": "add", "path": "/spec/a", "value": None},
                                            {"op": "add", "path": "/spec/b", "value": 1}], id="no current, sorted"),
    pytest.param({"a": 1}, None, [{"op": "remove", "path": "/spec/a"}], id="no wanted"),
    pytest.param({"a": 1}, {"a": 1.0}, [], id="1 == 1.0"),
    pytest.param({"a": False}, {"a": None}, [{"op": "replace", "path": "/spec/a", "value": None}], id="false vs null"),
])
def test_spec_patch_cases(current: Any, wanted: Any, expected: list[dict[str, Any]]) -> None:
    assert spec_patch(current, wanted) == expected


# --- backups -------------------------------------------------------------------------------------

def backup(name: str, created: str | None, stamp: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": stamp}
    if created is not None:
        meta["annotations"] = {"gpushare.io/created-at": created}
    return {"metadata": meta}


def test_newest_backup() -> None:
    older = backup("gpushare-clusterpolicy-backup-20250101t000000z", "2025-01-01T00:00:00Z", "2025-03-01T00:00:00Z")
    newer = backup("gpushare-clusterpolicy-backup-20250201t000000z", "2025-02-01T00:00:00Z", "2025-01-01T00:00:00Z")
    assert newest_backup([newer, older]) is newer
    assert newest_backup([older, newer]) is newer
    assert newest_backup([]) == {}
    assert newest_backup(None) == {}


def test_newest_backup_ties_broken_by_creation_then_name() -> None:
    a = backup("a", None, "2025-01-02T00:00:00Z")
    b = backup("b", None, "2025-01-01T00:00:00Z")
    c = backup("c", None, "2025-01-01T00:00:00Z")
    assert newest_backup([a, b]) is a
    assert newest_backup([c, b]) is c


# --- evicted workloads ---------------------------------------------------------------------------

def evicted(name: str, owner: tuple[str, str] = ("ReplicaSet", "train-abc"), namespace: str = "ml") -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "owner_kind": owner[0], "owner_name": owner[1], "node": "gpu-1"}


def test_whereabouts() -> None:
    pods = [pod("train-abc-new1", node="gpu-2"),
            pod("train-abc-new2", node=None, conditions=[
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]),
            pod("train-abc-new3", node=None),
            pod("train-abc-old", deleting=True),
            pod("train-abc-elsewhere", namespace="other", node="gpu-3"),
            pod("job-x", owner=("Job", "x"), node="gpu-4")]
    gone = [evicted("train-abc-1"), evicted("train-abc-2"), evicted("solo", owner=("", "")),
            evicted("lost", owner=("StatefulSet", "db"))]
    rows = whereabouts(pods, gone)
    assert rows == [
        {"workload": "ml/ReplicaSet/train-abc", "pod": "train-abc-new1", "where": "running on gpu-2"},
        {"workload": "ml/ReplicaSet/train-abc", "pod": "train-abc-new2",
         "where": "Pending: Unschedulable: 0/3 nodes are available"},
        {"workload": "ml/ReplicaSet/train-abc", "pod": "train-abc-new3", "where": "Pending: not yet tried by the scheduler"},
        {"workload": "ml/solo", "pod": "-", "where": "not recreated (no controller)"},
        {"workload": "ml/StatefulSet/db", "pod": "-", "where": "no replacement pod"}]
    assert whereabouts_lines(rows + [{"workload": "ml/ReplicaSet/train-abc", "pod": "train-abc-new4",
                                      "where": "running on gpu-2"}]) == [
        "ml/ReplicaSet/train-abc: train-abc-new1, train-abc-new4: running on gpu-2",
        "ml/ReplicaSet/train-abc: train-abc-new2: Pending: Unschedulable: 0/3 nodes are available",
        "ml/ReplicaSet/train-abc: train-abc-new3: Pending: not yet tried by the scheduler",
        "ml/solo: -: not recreated (no controller)",
        "ml/StatefulSet/db: -: no replacement pod"]
    assert whereabouts(pods, None) == [] and whereabouts_lines(None) == []


# --- report, hosts, patches ----------------------------------------------------------------------

@pytest.mark.parametrize("n, scheduling, pool", [
    (node(), "schedulable", "none"),
    (node(unschedulable=True, annotations={"gpushare.io/cordoned-by": "rollback-timeslicing"}),
     "cordoned (by this runbook)", "none"),
    (node(unschedulable=True, labels={"gpu-mode": "shared"}), "cordoned (before the run: kept)", "label"),
    (node(labels={"gpu-mode": "shared"}, taints=[POOL_TAINT]), "schedulable", "label+taint"),
    (node(taints=[POOL_TAINT]), "schedulable", "taint"),
])
def test_report_row(n: dict[str, Any], scheduling: str, pool: str) -> None:
    gone = [{"node": "gpu-1"}, {"node": "gpu-1"}, {"node": "gpu-2"}]
    assert report_row(state(n), gone) == ["gpu-1", "2", "1", 2, 0, pool, scheduling, 2]
    assert report_row(state(n), None)[-1] == 0


class HostVars(dict):
    pass


def test_host_nodes() -> None:
    hostvars = {"h1": {"timeslicing_node_name": "gpu-node-1"}, "h2": {}, "h3": {"timeslicing_node_name": ""},
                "h4": "not a mapping", "h5": HostVars(timeslicing_node_name=7)}
    assert host_nodes(["h1", "h2", "h3", "h4", "h5"], hostvars) == ["gpu-node-1", "h2", "h3", "h4", "7"]
    assert host_nodes(None, hostvars) == []


def test_evict_label_patches() -> None:
    assert evict_label_patches([{"namespace": "ml", "name": "p1"}, {"namespace": "x", "name": "p2"}]) == [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "p1", "namespace": "ml", "labels": {"gpushare.io/evict": "rollback-timeslicing"}}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "p2", "namespace": "x", "labels": {"gpushare.io/evict": "rollback-timeslicing"}}}]
    assert evict_label_patches(None) == []
