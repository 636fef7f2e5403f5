"""Unit tests of gpushare.share_check (plan and judgement of the share check) and of the share_check
role's filter plugin, which registers them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpushare.model.pods import Pod
from gpushare.share_check import plan as planning
from gpushare.share_check import report
from gpushare.share_check.settings import Inputs
from tests.support.filters import load_filters

SHARED = "nvidia.com/gpu.shared"
GPU = "nvidia.com/gpu"
CONFIG = ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    failRequestsGreaterThanOne: {fail}\n"
          "    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n")
INPUTS = {"namespace": "gpushare-share-check", "namespace_labels": {}, "name": "gpu-share-check", "replicas": None,
          "image": "cuda", "command": ["bash", "-lc", "nvidia-smi -L && sleep infinity"], "image_pull_policy": "IfNotPresent",
          "pool_label_key": "gpu-mode", "pool_label_value": "shared", "pool_taint_key": "nvidia.com/gpu",
          "pool_taint_value": "shared", "fail_requests_greater_than_one": None, "overflow": True, "exec": False,
          "timeout": 180, "poll_interval": 1, "keep": False, "operator_namespace": "gpu-operator"}
TARGETS = {"gpu-node": "gpu-node"}


def node(name: str = "gpu-node", shared: int = 4, gpus: int = 1, pool: bool = True, config_label: str = "shared",
         taint_value: str | None = "shared", hostname: str | None = None) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
              "kubernetes.io/hostname": hostname or name}
    if shared:
        labels.update({"nvidia.com/gpu.replicas": str(shared // gpus), "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    if pool:
        labels["gpu-mode"] = "shared"
    if config_label:
        labels["nvidia.com/device-plugin.config"] = config_label
    taints = [{"key": "nvidia.com/gpu", "value": taint_value, "effect": "NoSchedule"}] if taint_value is not None else []
    allocatable = {SHARED: str(shared), GPU: "0"} if shared else {GPU: str(gpus)}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {"taints": taints},
            "status": {"capacity": dict(allocatable), "allocatable": allocatable}}


def pod(name: str, node_name: str = "gpu-node", request: int = 1, phase: str = "Running", namespace: str = "ml",
        labels: dict[str, str] | None = None, owner: str | None = None, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    return {"kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"limits": {SHARED: request}}}]},
            "status": {"phase": phase, **status}}


def cluster(nodes: list[dict[str, Any]] | None = None, pods: list[dict[str, Any]] | None = None, fail: str = "true",
            **extra: Any) -> dict[str, Any]:
    return {"nodes": nodes if nodes is not None else [node()], "node_pods": pods or [], "check_namespace": None,
            "check_pods": [], "check_deployments": [],
            "clusterpolicy": {"spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "default"}}}},
            "configmaps": [{"metadata": {"name": "time-slicing-config"},
                            "data": {"default": "version: v1\n", "shared": CONFIG.format(fail=fail)}}], **extra}


def make(read: dict[str, Any] | None = None, targets: dict[str, str] | None = None, **inputs: Any) -> planning.SharePlan:
    return planning.plan(read or cluster(), Inputs.of({**INPUTS, **inputs}), targets or TARGETS)


# --- inputs -------------------------------------------------------------------------------------------

def test_inputs_convert_what_the_command_line_gives() -> None:
    values = Inputs.of({**INPUTS, "replicas": "3", "overflow": "false", "keep": "yes", "timeout": "60",
                                 "fail_requests_greater_than_one": "", "command": "sleep infinity"})
    assert (values.replicas, values.overflow, values.keep, values.timeout) == (3, False, True, 60)
    assert values.fail_requests_greater_than_one is None
    assert values.command == ["bash", "-lc", "sleep infinity"]


@pytest.mark.parametrize("bad, said", [
    ({"namespace": "Share_Check"}, "share_check_namespace 'Share_Check' is not a valid namespace name"),
    ({"name": "gpu.check"}, "share_check_name 'gpu.check' must be a DNS label"),
    ({"namespace_labels": {"team": "ml ops"}}, "share_check_namespace_labels: team=ml ops is not a valid label"),
    ({"command": []}, "share_check_command is empty"),
    ({"replicas": 0}, "share_check_replicas=0: the Deployment needs at least 1 pod"),
    ({"timeout": 1, "poll_interval": 5}, "share_check_timeout (1 s) must be at least share_check_poll_interval (5 s)"),
    ({"poll_interval": 0}, "share_check_timeout (180 s) must be at least share_check_poll_interval (0 s), which must be "
                           "at least 1."),
])
def test_bad_inputs_are_refused_before_anything_is_read(bad: dict[str, Any], said: str) -> None:
    (refusal,) = make(**bad).refusals
    assert refusal.startswith(said) and refusal.endswith("Nothing was changed."), refusal


# --- refusals from the cluster as read ------------------------------------------------------------------

@pytest.mark.parametrize("read, said", [
    (cluster(nodes=[]), "gpu-node is not a node of this cluster (kubectl get node gpu-node finds nothing): check -l, "
                        "the inventory, or the host's gpushare_node_name."),
    (cluster(nodes=[node(shared=0)]), "gpu-node does not share its GPUs: it advertises 1 nvidia.com/gpu, 1 replica(s) "
                                      "per GPU, sharing strategy none. Run the enable runbook first: ansible-playbook "
                                      "playbooks/enable-timeslicing.yml -l trial."),
    (cluster(nodes=[node(pool=False)]), "gpu-node shares its GPUs but is not in the shared pool (label gpu-mode=shared)"),
    (cluster(pods=[pod("train", request=3), pod("infer", request=1)]),
     "gpu-node has 0 of its 4 nvidia.com/gpu.shared free (running pods hold the rest: kubectl describe node gpu-node); "
     "the check needs 1. Free replicas first."),
    (cluster(fail="maybe"), "Cannot tell whether the device plugin on gpu-node refuses requests for more than one replica: "
                       "the device plugin cannot load key 'shared' of ConfigMap time-slicing-config"),
    (cluster(nodes=[node(config_label="")]), "Cannot tell whether the device plugin on gpu-node refuses requests for "
                                             "more than one replica: key 'default' of ConfigMap time-slicing-config "
                                             "configures no sharing."),
    (cluster(check_namespace={"metadata": {"name": "gpushare-share-check", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
     "Namespace gpushare-share-check is being deleted (the cleanup of an earlier check)"),
])
def test_refusals(read: dict[str, Any], said: str) -> None:
    (refusal,) = make(read, {"trial": "gpu-node"}).refusals
    assert refusal.startswith(said) and refusal.endswith("Nothing was changed."), refusal


def test_too_many_replicas_asked() -> None:
    (refusal,) = make(cluster(pods=[pod("train", request=2)]), replicas=3).refusals
    assert "has 2 of its 4 nvidia.com/gpu.shared free" in refusal and "the check needs 3. Lower share_check_replicas" in refusal


def test_every_node_is_judged_at_once() -> None:
    read = cluster(nodes=[node(), node("gpu-b", shared=0)])
    refusals = make(read, {"gpu-node": "gpu-node", "gpu-b": "gpu-b", "gpu-c": "gpu-c"}).refusals
    assert [r.split(" ", 1)[0] for r in refusals] == ["gpu-b", "gpu-c"]


# --- the plan ----------------------------------------------------------------------------------------

def test_the_seed_check_on_a_one_card_node() -> None:
    planned = make(cluster(pods=[pod("finished", request=4, phase="Succeeded")]), {"trial": "gpu-node"})
    assert planned.refusals == []
    (check,) = planned.nodes
    assert (check.node, check.host, check.resource, check.allocatable, check.free, check.replicas) == (
        "gpu-node", "trial", SHARED, 4, 4, 4)
    changes = planned.changes
    assert [c.kind for c in changes["prepare"]] == ["Namespace"]
    namespace = changes["prepare"][0].body["metadata"]
    assert namespace["labels"] == {"app.kubernetes.io/managed-by": "gpushare", "pod-security.kubernetes.io/enforce": "restricted",
                                   "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
    assert namespace["annotations"] == {"gpushare.io/created-by": "verify-sharing"}
    (two,), (deployment,), (overflow,) = changes["two"], changes["deploy"], changes["overflow"]
    assert (two.name, overflow.name, deployment.name) == (
        "gpu-share-check-gpu-node-two", "gpu-share-check-gpu-node-overflow", "gpu-share-check-gpu-node")
    assert two.body["spec"]["containers"][0]["resources"] == {"limits": {SHARED: 2}}
    assert deployment.body["spec"]["replicas"] == 4
    template = deployment.body["spec"]["template"]
    assert template["metadata"]["labels"] == deployment.body["spec"]["selector"]["matchLabels"] == {
        "app": "gpu-share-check", "app.kubernetes.io/managed-by": "gpushare",
        "gpushare.io/share-check-node": "gpu-node", "gpushare.io/share-check": "replica"}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"gpu-mode": "shared", "kubernetes.io/hostname": "gpu-node"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}]
    assert spec["containers"][0]["command"] == ["bash", "-lc", "nvidia-smi -L && sleep infinity"]
    # Pod Security "restricted": non-root, no escalation, no capabilities, RuntimeDefault seccomp
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                       "seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"}}
    assert "hostPID" not in spec and "privileged" not in spec["containers"][0]["securityContext"]
    assert [c.as_dict() for c in changes["cleanup"]] == [{"action": "delete", "kind": "Namespace", "name": "gpushare-share-check",
                                   "why": "remove the check"}]
    assert planned.lines == [
        "Share check on gpu-node: 4 of 4 nvidia.com/gpu.shared free (1 GPU(s) x 4 replicas).",
        "- pod gpu-share-check-gpu-node-two asks for 2: the device plugin must refuse it",
        "- Deployment gpu-share-check-gpu-node: 4 pods x 1 nvidia.com/gpu.shared, every one must run on gpu-node",
        "- pod gpu-share-check-gpu-node-overflow, one beyond the free replicas: must stay Pending",
        "In namespace gpushare-share-check (created for the check); removed afterwards.",
    ]


def test_extra_namespace_labels_cannot_lift_pod_security() -> None:
    planned = make(namespace_labels={"team": "ml", "pod-security.kubernetes.io/enforce": "privileged"})
    labels = planned.changes["prepare"][0].body["metadata"]["labels"]
    assert (labels["team"], labels["pod-security.kubernetes.io/enforce"]) == ("ml", "restricted")


def test_the_pods_tolerate_the_taint_the_node_has_and_select_its_hostname() -> None:
    planned = make(cluster(nodes=[node(taint_value="present", hostname="host-7")]))
    spec = planned.changes["deploy"][0].body["spec"]["template"]["spec"]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert spec["nodeSelector"]["kubernetes.io/hostname"] == "host-7"


def test_a_node_named_differently_from_its_host() -> None:
    planned = make(cluster(nodes=[node("ip-10-0-0-7.ec2.internal")]), {"trial": "ip-10-0-0-7.ec2.internal"})
    assert planned.refusals == []
    assert planned.nodes[0].deployment == "gpu-share-check-ip-10-0-0-7.ec2.internal"
    assert planned.changes["two"][0].body["metadata"]["labels"]["gpushare.io/share-check-node"] == "ip-10-0-0-7.ec2.internal"


def test_without_refusal_the_pod_asking_for_two_is_skipped() -> None:
    planned = make(cluster(fail="false"))
    assert planned.changes["two"] == []
    assert planned.nodes[0].two_skipped == "failRequestsGreaterThanOne is off: the device plugin hands a pod 2 replicas"
    assert make(fail_requests_greater_than_one="true").changes["two"][0].name == "gpu-share-check-gpu-node-two"


def test_fewer_pods_than_free_skip_the_overflow() -> None:
    planned = make(replicas=2)
    assert planned.changes["overflow"] == []
    assert planned.nodes[0].overflow_skipped == "the Deployment leaves 2 nvidia.com/gpu.shared free"
    assert make(overflow=False).nodes[0].overflow_skipped == "share_check_overflow is off"


def test_one_free_replica_cannot_host_a_pod_asking_for_two() -> None:
    planned = make(cluster(pods=[pod("train", request=3)]))
    assert planned.nodes[0].two_skipped == "only 1 nvidia.com/gpu.shared free: a pod asking for 2 could not be scheduled"
    assert planned.nodes[0].replicas == 1


def test_a_kept_check_is_replaced_and_does_not_count_as_taken() -> None:
    mine = {"app": "gpu-share-check", "gpushare.io/share-check-node": "gpu-node", "gpushare.io/share-check": "replica"}
    kept = [pod(f"gpu-share-check-gpu-node-{i}", namespace="gpushare-share-check", labels=mine, owner="rs") for i in range(3)]
    single = pod("gpu-share-check-gpu-node-overflow", namespace="gpushare-share-check",
                 labels={**mine, "gpushare.io/share-check": "overflow"})
    deployment = {"kind": "Deployment", "metadata": {"name": "gpu-share-check-gpu-node", "labels": mine}}
    namespace = {"metadata": {"name": "gpushare-share-check", "annotations": {"gpushare.io/created-by": "verify-sharing"}}}
    read = cluster(pods=kept, check_pods=[*kept, single], check_deployments=[deployment], check_namespace=namespace)
    planned = make(read)
    assert planned.nodes[0].free == 4 and planned.leftovers
    assert [(c.action, c.kind, c.name) for c in planned.changes["prepare"]] == [
        ("delete", "Deployment", "gpu-share-check-gpu-node"), ("delete", "Pod", "gpu-share-check-gpu-node-overflow")]
    assert planned.lines[-1] == "In namespace gpushare-share-check; removed afterwards."


def test_a_namespace_the_check_did_not_create_is_kept() -> None:
    planned = make(cluster(check_namespace={"metadata": {"name": "gpushare-share-check"}}))
    assert not planned.namespace_ours and planned.changes["prepare"] == []
    assert [(c.kind, c.name) for c in planned.changes["cleanup"]] == [
        ("Deployment", "gpu-share-check-gpu-node"), ("Pod", "gpu-share-check-gpu-node-two"),
        ("Pod", "gpu-share-check-gpu-node-overflow")]
    assert planned.lines[-1] == "In namespace gpushare-share-check (not the check's own: it is kept); removed afterwards."
    assert make(keep=True).changes["cleanup"] == []


def test_selector_names_every_node() -> None:
    values = Inputs.of(INPUTS)
    assert planning.selector(values, ["b", "a"]) == "app=gpu-share-check,gpushare.io/share-check-node in (a,b)"


def test_config_of_the_clusterpolicy_default_key() -> None:
    read = cluster(nodes=[node(config_label="")], fail="true")
    read["clusterpolicy"]["spec"]["devicePlugin"]["config"]["default"] = "shared"
    assert make(read).nodes[0].fail_gt_one is True


# --- judging what the pods show ------------------------------------------------------------------------

REJECTED = {"reason": "UnexpectedAdmissionError", "message": "Allocate failed: maximum request size for shared resources is 1"}
UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/4 nodes are available: 1 Insufficient nvidia.com/gpu.shared."}]


def started(**inputs: Any) -> dict[str, Any]:
    planned = make(**inputs).as_dict()
    return report.start(planned, "gpushare-share-check", {"label_key": "gpu-mode", "label_value": "shared", "taint": None},
                        False)


def check_pod(name: str, role: str, **kwargs: Any) -> dict[str, Any]:
    labels = {"app": "gpu-share-check", "gpushare.io/share-check-node": "gpu-node", "gpushare.io/share-check": role}
    return pod(name, namespace="gpushare-share-check", labels=labels, **kwargs)


def test_start() -> None:
    (n,) = started()["nodes"]
    assert n["refuse"] == {"status": "not run", "pod": "gpu-share-check-gpu-node-two", "phase": "", "reason": "",
                           "message": ""}
    assert n["exec"]["status"] == "skipped" and n["exec"]["reason"] == "share_check_exec is off"
    (n,) = started(replicas=2)["nodes"]
    assert n["overflow"]["status"] == "skipped" and n["overflow"]["pod"] == ""


def test_the_refusal_passes() -> None:
    judged = report.judge_refusal(started(), [check_pod("gpu-share-check-gpu-node-two", "two", phase="Failed", **REJECTED)],
                                  "gpu-operator")
    assert judged["problems"] == []
    assert judged["nodes"][0]["refuse"] == {"status": "passed", "pod": "gpu-share-check-gpu-node-two", "phase": "Failed",
                                            **REJECTED}


@pytest.mark.parametrize("pods, said", [
    ([check_pod("gpu-share-check-gpu-node-two", "two", phase="Running")],
     "gpu-share-check-gpu-node-two asked for 2 nvidia.com/gpu.shared with failRequestsGreaterThanOne on, and gpu-node "
     "did not refuse it with UnexpectedAdmissionError: it is gpu-share-check-gpu-node-two Running on gpu-node. The "
     "device plugin on gpu-node does not run the config its label or the ClusterPolicy names (kubectl logs -n "
     "gpu-operator -l app=nvidia-device-plugin-daemonset)."),
    ([check_pod("gpu-share-check-gpu-node-two", "two", phase="Failed", reason="OutOfnvidia.com/gpu.shared")],
     "it is gpu-share-check-gpu-node-two Failed on gpu-node (OutOfnvidia.com/gpu.shared)."),
    ([], "it is missing."),
])
def test_the_refusal_fails(pods: list[dict[str, Any]], said: str) -> None:
    judged = report.judge_refusal(started(), pods, "gpu-operator")
    (problem,) = judged["problems"]
    assert said in problem, problem
    assert judged["nodes"][0]["refuse"]["status"] == "failed"


def replicas(count: int, node_name: str = "gpu-node", phase: str = "Running") -> list[dict[str, Any]]:
    return [check_pod(f"gpu-share-check-gpu-node-abc-{i}", "replica", node_name=node_name, phase=phase, owner="rs")
            for i in range(count)]


def test_sharing_passes() -> None:
    overflow = check_pod("gpu-share-check-gpu-node-overflow", "overflow", node_name="", phase="Pending",
                         conditions=UNSCHEDULABLE)
    judged = report.judge_sharing(started(), replicas(4) + [overflow])
    assert judged["problems"] == []
    (n,) = judged["nodes"]
    assert n["running"] == 4 and [p["name"] for p in n["pods"]] == [f"gpu-share-check-gpu-node-abc-{i}" for i in range(4)]
    assert n["overflow"] == {"status": "passed", "pod": "gpu-share-check-gpu-node-overflow", "phase": "Pending",
                             "reason": "Unschedulable", "message": UNSCHEDULABLE[0]["message"]}


def test_sharing_fails_when_the_overflow_runs_and_a_pod_is_elsewhere() -> None:
    overflow = check_pod("gpu-share-check-gpu-node-overflow", "overflow", phase="Running")
    judged = report.judge_sharing(started(), replicas(3) + replicas(1, node_name="gpu-b")[:0]
                                  + [check_pod("gpu-share-check-gpu-node-abc-9", "replica", node_name="gpu-b", owner="rs"),
                                     overflow])
    first, second = judged["problems"]
    assert first.startswith("3 of 4 pods of gpushare-share-check/gpu-share-check-gpu-node run on gpu-node: ")
    assert "gpu-share-check-gpu-node-abc-9 Running on gpu-b" in first
    assert second.startswith("gpu-share-check-gpu-node-overflow, one pod beyond the 4 free nvidia.com/gpu.shared of "
                             "gpu-node, should stay Pending with the scheduler's \"Insufficient nvidia.com/gpu.shared\", "
                             "but it is gpu-share-check-gpu-node-overflow Running on gpu-node.")


def test_terminating_pods_do_not_count() -> None:
    pods = replicas(4)
    pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    judged = report.judge_sharing(started(replicas=2), pods)
    assert judged["nodes"][0]["running"] == 3 and judged["problems"][0].startswith("3 of 2 pods")


def test_exec() -> None:
    judged = report.judge_sharing(started(replicas=2), replicas(2))
    assert report.exec_targets(judged) == [{"node": "gpu-node", "pod": "gpu-share-check-gpu-node-abc-0"},
                                           {"node": "gpu-node", "pod": "gpu-share-check-gpu-node-abc-1"}]
    one = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab)\n"
    other = one.replace("GPU-1b2c", "GPU-9f9f")
    same = report.judge_exec(judged, [{"item": t, "stdout": one} for t in report.exec_targets(judged)])
    assert same["problems"] == [] and same["nodes"][0]["exec"]["distinct"] == ["GPU-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab"]
    runs = [{"item": t, "stdout": s} for t, s in zip(report.exec_targets(judged), (one, other))]
    (problem,) = report.judge_exec(judged, runs)["problems"]
    assert problem.startswith("nvidia-smi -L in the check pods on gpu-node (1 physical GPU(s)): gpu-share-check-gpu-node-"
                              "abc-0 sees GPU-1b2c")
    (problem,) = report.judge_exec(judged, [{"item": report.exec_targets(judged)[0], "stdout": ""}])["problems"]
    assert "sees no GPU" in problem


def test_pod_reasons_come_from_the_kubelet_then_the_scheduler() -> None:
    assert (Pod(pod("a", phase="Failed", **REJECTED)).reason, Pod(pod("a", phase="Failed", **REJECTED)).message) == (
        REJECTED["reason"], REJECTED["message"])
    pending = Pod(pod("b", node_name="", phase="Pending", conditions=UNSCHEDULABLE))
    assert (pending.reason, pending.unschedulable, pending.message) == ("Unschedulable", True, UNSCHEDULABLE[0]["message"])
    scheduled = Pod(pod("c", conditions=[{"type": "PodScheduled", "status": "True", "reason": "Scheduled"}]))
    assert (scheduled.reason, scheduled.unschedulable) == ("", False)
    assert report.describe(pending) == f"b Pending (Unschedulable: {UNSCHEDULABLE[0]['message']})"


# --- the role's filters ----------------------------------------------------------------------------------

F = load_filters("plugins/filter/share_check.py")


def test_the_role_registers_the_plan_and_the_judges() -> None:
    assert sorted(F) == ["share_check_exec_targets", "share_check_input_problems", "share_check_judge",
                         "share_check_judge_exec", "share_check_plan"]


def test_input_problems_are_judged_before_any_read() -> None:
    problems = F["share_check_input_problems"]({**INPUTS, "namespace": "Share_Check"})
    assert problems == ["share_check_namespace 'Share_Check' is not a valid namespace name (a DNS label: lower-case "
                        "letters, digits and '-', at most 63). Nothing was changed."]
    assert F["share_check_input_problems"](INPUTS) == []


def test_plan_filter_from_a_read() -> None:
    read = {"resources": cluster(), "not_served": [], "caller": {"command": "ansible-playbook"}}
    planned = F["share_check_plan"](read, {**INPUTS, "replicas": "", "exec": "false"}, {"trial": "gpu-node"})
    json.dumps(planned)  # what set_fact stores: plain data
    assert planned["refusals"] == [] and not planned["namespace_exists"]
    assert planned["selector"] == "app=gpu-share-check,gpushare.io/share-check-node in (gpu-node)"
    assert planned["replicas"] == {"gpu-node": 4}
    assert planned["result"]["status"] == "pending" and planned["result"]["pool"]["label_key"] == "gpu-mode"
    refused = F["share_check_judge"](planned["result"], {"resources": {"pods": []}}, "refusal", "gpu-operator")
    assert refused["nodes"][0]["refuse"]["status"] == "failed"
    shared = F["share_check_judge"](copy.deepcopy(planned["result"]), {"resources": {"pods": replicas(4)}}, "sharing",
                                    "gpu-operator")
    assert shared["nodes"][0]["running"] == 4
