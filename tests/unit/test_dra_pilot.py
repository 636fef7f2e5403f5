"""The DRA pilot's enable plan, its pool model, the verify's claim check (gpushare.dra) and the
simulated DRA driver's slice and prepare step (gpushare_testbed.simulator.dra_driver)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from gpushare.dra import admission, dcgm
from gpushare.dra import plan as pilot
from gpushare.dra.checks import claim_problems
from gpushare.dra.pool import Pool
from gpushare.dra.rollback import plan as rollback_plan
from gpushare.dra.settings import PilotSettings, Settings
from gpushare.dra.verify import claim_uuid
from gpushare.dra.verify import plan as verify_plan
from gpushare.k8s.changes import Change
from gpushare.prometheus import client as prometheus
from gpushare.runbook.records import Intent, new_record
from gpushare_testbed.gpu_identity import gpu_uuid
from gpushare_testbed.simulator import dra_driver as dra
from gpushare_testbed.simulator.dra_kubelet import DraKubelet
from tests.unit.cluster_objects import workload_pod
from tests.unit.test_dra_readiness import facts, ready_node

NOW = dt.datetime(2026, 12, 6, 7, 0, tzinfo=dt.timezone.utc)


def settings(sharing: str = "timeslicing") -> PilotSettings:
    return PilotSettings(readiness=Settings(sharing=sharing))


def read(node: dict[str, Any], pods: list[dict[str, Any]] | None = None, device_class: Any = None) -> dict[str, Any]:
    return {"node": node, "pods": pods or [], "device_class": device_class, "records": enable_records(node),
            "records_namespace": {"metadata": {}}}


def enable_record(name: str, node: str = "gpu-node", device_plugin: str | None = "true") -> dict[str, Any]:
    """The run record an enable of `node` writes before its mark."""
    intent = Intent(pilot.RUNBOOK, [node], node_labels={node: {pilot.DEVICE_PLUGIN_LABEL: device_plugin,
                                                                "nvidia.com/dra-kubelet-plugin": None}})
    return new_record(name, "gpushare-system", intent, None, NOW, {})


def enable_records(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The record the node's mark names, as the enable wrote it."""
    try:
        mark = json.loads((node["metadata"].get("annotations") or {}).get(pilot.MARK) or "{}")
        return [enable_record(mark["run"], device_plugin=mark["device_plugin"])]
    except (ValueError, TypeError, KeyError):  # no mark, or a forged one
        return []


def driver(gates: str = "TimeSlicingSettings=true,MPSSupport=true,", selector: str = "nvidia.com/dra-kubelet-plugin"
           ) -> list[dict[str, Any]]:
    """The DRA driver's kubelet-plugin DaemonSet as its chart renders it."""
    return [{"spec": {"template": {"spec": {"nodeSelector": {selector: "true"}, "containers": [{"env": [
        {"name": "FEATURE_GATES", "value": gates}]}]}}}}]


def plan_of(node: dict[str, Any], pods: list[dict[str, Any]] | None = None, device_class: Any = None,
            sharing: str = "timeslicing", **fact_overrides: Any) -> pilot.PilotPlan:
    fact_overrides.setdefault("driver", driver())
    return pilot.plan(facts(nodes=[node], pods=pods or [], **fact_overrides), read(node, pods, device_class),
                      settings(sharing), {}, NOW)


def piloted(node: dict[str, Any], cls: dict[str, Any]) -> dict[str, Any]:
    """The node as a finished enable leaves it."""
    node["metadata"]["labels"].update({pilot.DEVICE_PLUGIN_LABEL: "false", "nvidia.com/dra-kubelet-plugin": "true"})
    node["metadata"].setdefault("annotations", {})[pilot.MARK] = json.dumps({"device_plugin": "true",
                                                                             "run": "gpushare-run-enable-dra-pilot-rec"})
    node["spec"]["taints"] = [dict(pilot.TAINT)]
    return node


def test_the_plan_cordons_switches_the_plugins_and_uncordons_with_the_taint_in_order() -> None:
    result = plan_of(ready_node(gpus=2))
    assert result.refusals == []
    assert list(result.changes) == ["record", "cordon", "device_plugin", "kubelet_plugin", "device_class", "uncordon",
                                    "finish"]
    mark = json.loads(result.changes["cordon"][0].body["metadata"]["annotations"][pilot.MARK])
    assert mark == {"device_plugin": "true", "plugin_label": None, "taint_added": True, "run": result.record}
    intent = json.loads(result.changes["record"][0].body["data"]["intent.json"])
    assert intent["node_labels"]["gpu-node"][pilot.DEVICE_PLUGIN_LABEL] == "true"
    assert [c.action for c in result.changes["uncordon"]] == ["taint", "merge"]
    assert result.lines[0].startswith("Plan (enable-dra-pilot): share the 2 GPU(s) of gpu-node through DRA (TimeSlicing")
    assert result.expected["gpus"] == 2


@pytest.mark.parametrize(("sharing", "strategy"), [("timeslicing", "TimeSlicing"), ("mps", "MPS")])
def test_the_device_class_carries_the_gpu_config_of_the_sharing(sharing: str, strategy: str) -> None:
    result = plan_of(ready_node(), sharing=sharing)
    body = result.changes["device_class"][0].body
    assert body["spec"]["config"][0]["opaque"]["parameters"]["sharing"]["strategy"] == strategy
    assert dra.gpu_config_problem(body["spec"]["config"][0]["opaque"]["parameters"], {dra.GATES[strategy]: True}) is None


def test_a_finished_pilot_plans_nothing() -> None:
    node = ready_node()
    cls = pilot.device_class(settings())
    result = plan_of(piloted(node, cls), device_class={**cls, "metadata": {**cls["metadata"], "resourceVersion": "7"}})
    assert result.changes == {}
    assert result.lines[0].startswith("Nothing to do: gpu-node is in the DRA pilot") and result.lines[0].endswith(
        "Nothing was changed.")


def test_an_interrupted_run_is_finished_under_its_own_record() -> None:
    node = ready_node()
    node["metadata"]["labels"][pilot.DEVICE_PLUGIN_LABEL] = "false"
    node["metadata"]["annotations"] = {pilot.MARK: json.dumps({"device_plugin": "true", "run": "gpushare-run-x"}),
                                       "gpushare.io/cordoned-by": pilot.RUNBOOK}
    node["spec"]["unschedulable"] = True
    result = plan_of(node)
    assert "record" not in result.changes and "device_plugin" not in result.changes
    assert result.record == "gpushare-run-x"
    assert "cordon" not in result.changes  # its cordon and mark are there already
    assert result.changes["uncordon"][-1].body["spec"] == {"unschedulable": None}


def test_a_gpu_pod_is_drained_and_a_bare_one_refused() -> None:
    pods = [workload_pod("trainer", "gpu-node", resource="nvidia.com/gpu"),
            workload_pod("bare", "gpu-node", resource="nvidia.com/gpu", owner=None)]
    result = plan_of(ready_node(), pods=pods[:1])
    assert result.refusals == [] and result.evict == ["team-a/trainer"]
    refused = plan_of(ready_node(), pods=pods)
    assert len(refused.refusals) == 1 and "team-a/bare uses a GPU of gpu-node and has no controller" in refused.refusals[0]
    assert refused.refusals[0].endswith("Nothing was changed.") and refused.changes == {}


def test_a_pod_holding_a_claim_the_pilot_did_not_create_is_refused() -> None:
    pod = workload_pod("dra-user", "gpu-node", resource="cpu")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "theirs"}]
    result = plan_of(ready_node(), pods=[pod])
    assert result.refusals == ["Pod team-a/dra-user on gpu-node holds a resource claim the pilot did not create: move it "
                               "first. Nothing was changed."]


def test_the_readiness_refusals_come_first_and_write_nothing() -> None:
    result = plan_of(ready_node(), gpuclusters=["gpu-cluster"])
    assert result.changes == {}
    assert "FAIL operator: GPUCluster gpu-cluster exists" in result.refusals[0]
    assert result.refusals[0].endswith("Nothing was changed.")


@pytest.mark.parametrize(("found", "reason"), [
    ([], "FAIL driver: the NVIDIA DRA driver is not installed in nvidia-dra-driver-gpu."),
    (driver(selector="feature.node.kubernetes.io/pci-10de.present"),
     "FAIL driver: no DaemonSet of the DRA driver in nvidia-dra-driver-gpu selects nodes by nvidia.com/dra-kubelet-plugin"),
    (driver(gates="MPSSupport=true,"), "FAIL driver gates: the DRA driver in nvidia-dra-driver-gpu runs without "
                                       "TimeSlicingSettings=true"),
])
def test_a_driver_the_pilot_cannot_use_is_refused(found: list[dict[str, Any]], reason: str) -> None:
    result = plan_of(ready_node(), driver=found)
    assert result.changes == {} and reason in result.refusals[0], result.refusals


def _slice(node: str, generation: int, count: int, devices: int, first: int = 0) -> dict[str, Any]:
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {
        "name": node, "generation": generation, "resourceSliceCount": count},
        "devices": [{"name": f"gpu-{i}", "attributes": {"uuid": {"string": gpu_uuid(node, i)}}}
                    for i in range(first, first + devices)]}}


def test_a_complete_pool_has_its_slices_devices_and_uuids() -> None:
    pool = Pool.of([_slice("n", 1, 1, 2)], "gpu.nvidia.com", "n")
    assert pool.problems(2, [gpu_uuid("n", 0), gpu_uuid("n", 1)]) == []
    assert pool.problems(2, [gpu_uuid("m", 0), gpu_uuid("m", 1)])[0].startswith("n: the pool's device UUIDs")


def test_a_stale_generation_is_not_counted_and_a_missing_slice_is_incomplete() -> None:
    stale = Pool.of([_slice("n", 1, 1, 2), _slice("n", 2, 1, 1)], "gpu.nvidia.com", "n")
    assert stale.generation == 2 and stale.stale == 1
    assert stale.problems(2) == ["n: pool generation 2 has 1 devices, the node has 2 GPUs (nvidia.com/gpu.count)"]
    missing = Pool.of([_slice("n", 3, 2, 1)], "gpu.nvidia.com", "n")
    assert missing.problems(1) == ["n: pool generation 3 has 1 of its 2 slices (resourceSliceCount): incomplete"]
    assert Pool.of([], "gpu.nvidia.com", "n").problems(1) == ["n: no ResourceSlice of its pool yet"]


def _claim(results: list[tuple[str, str, str]], reserved: list[str], config: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "u"}, "status": {
        "allocation": {"devices": {"results": [{"driver": d, "pool": p, "device": n, "request": "gpu"} for d, p, n in results],
                                   "config": [{"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com",
                                                                                  "parameters": config}}]}},
        "reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in reserved]}}


def test_the_verified_claim_has_one_result_of_the_pool_reserved_for_the_check_pods() -> None:
    expected = verify_plan("gpu-node", 1, settings()).expected
    uids = {name: f"uid-{name}" for name in expected["pods"]}
    good = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0")], list(uids.values()), expected["gpu_config"])
    assert claim_problems(good, expected, uids) == []
    two = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0"), ("gpu.nvidia.com", "gpu-node", "gpu-1")],
                 list(uids.values())[:3], {"kind": "GpuConfig"})
    problems = claim_problems(two, expected, uids)
    assert len(problems) == 3
    assert "expected one (gpu.nvidia.com, gpu-node, gpu-N)" in problems[0]
    assert "reserved for 3 consumer(s), expected the 4 check pods" in problems[1]
    assert "does not carry the GpuConfig" in problems[2]


def test_the_gates_get_the_uuid_of_the_card_the_claim_got() -> None:
    """The release gates are scoped to the claim's one result: its device's `uuid` attribute in the node's
    pool as the simulated driver publishes it, not the node's first or every card."""
    node = ready_node(gpus=2)
    node["metadata"]["uid"] = "node-uid"
    slices = [dra.resource_slice(node, dra.devices(node), 1)]
    expected = verify_plan("gpu-node", 2, settings()).expected
    got = _claim([("gpu.nvidia.com", "gpu-node", "gpu-1")], [], expected["gpu_config"])
    assert claim_uuid(got, slices, expected) == gpu_uuid("gpu-node", 1)
    two = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0"), ("gpu.nvidia.com", "gpu-node", "gpu-1")], [], {})
    assert claim_uuid(two, slices, expected) == ""
    assert claim_uuid(None, slices, expected) == ""
    assert claim_uuid(_claim([("gpu.nvidia.com", "gpu-node", "gpu-7")], [], {}), slices, expected) == ""


def test_the_simulated_driver_publishes_the_node_gpus_under_dcgm_uuids() -> None:
    node = ready_node(gpus=2)
    node["metadata"]["uid"] = "node-uid"
    node["metadata"]["labels"]["nvidia.com/gpu.memory"] = "81559"
    body = dra.resource_slice(node, dra.devices(node), 1)
    assert body["spec"]["pool"] == {"name": "gpu-node", "generation": 1, "resourceSliceCount": 1}
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert [d["name"] for d in body["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    device = body["spec"]["devices"][1]
    assert device["attributes"]["uuid"] == {"string": gpu_uuid("gpu-node", 1)}
    assert device["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert device["capacity"] == {"memory": {"value": "81559Mi"}}
    assert device["attributes"]["driverVersion"] == {"version": "580.95.5"}  # semver: no leading zero


@pytest.mark.parametrize(("parameters", "gates", "problem"), [
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}, {}, (
        'error validating GPU config: "TimeSlicing" is selected as the GPU sharing strategy, but the '
        '"TimeSlicingSettings" feature gate is not enabled')),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "MPS"}}, {"TimeSlicingSettings": True}, (
        'error validating GPU config: "MPS" is selected as the GPU sharing strategy, but the "MPSSupport" feature '
        "gate is not enabled")),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "replicas": 4}},
     {"TimeSlicingSettings": True}, 'error decoding config parameters: strict decoding error: unknown field "sharing.replicas"'),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing",
                                                                   "timeSlicingConfig": {"interval": "Forever"}}},
     {"TimeSlicingSettings": True}, "error validating GPU config: unknown time-slice interval: Forever, supported "
                                    "time-slice intervals: Default, Short, Medium, Long"),
    ({"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}},
     {"TimeSlicingSettings": True}, None),
])
def test_the_simulated_driver_validates_a_gpu_config_as_the_driver_does(parameters: dict[str, Any], gates: dict[str, bool],
                                                                         problem: str | None) -> None:
    assert dra.gpu_config_problem(parameters, gates) == problem


def test_the_simulated_kubelet_prepares_only_an_allocated_reserved_claim_of_its_node() -> None:
    pod = {"metadata": {"name": "p", "uid": "pod-uid"}, "spec": {"nodeName": "gpu-node"}}
    config = {"apiVersion": dra.CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}
    claim = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0")], ["pod-uid"], config)
    assert dra.claim_problem(claim, "c", pod, {"TimeSlicingSettings": True}) is None
    assert dra.claim_problem(claim, "c", pod, None) == "DRA driver gpu.nvidia.com is not registered"
    assert "feature gate is not enabled" in str(dra.claim_problem(claim, "c", pod, {}))
    assert dra.claim_problem({**claim, "status": {}}, "c", pod, {}) == "ResourceClaim c is not allocated"
    other = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0")], ["someone"], config)
    assert dra.claim_problem(other, "c", pod, {"TimeSlicingSettings": True}) == "pod p is not reserved for ResourceClaim c"


def test_the_simulated_kubelet_prepares_the_claim_the_scheduler_made_for_extended_resources_too() -> None:
    """KEP-5004: kube-scheduler records its claim for a pod's DRA-backed extended resources in the pod's
    status, and the kubelet's DRA manager prepares it with the pod's own (pkg/kubelet/cm/dra/manager.go)."""
    special = {"resourceClaimName": "train-extended-resources-x1",
               "requestMappings": [{"containerName": "work", "requestName": "container-0-request-0",
                                    "resourceName": "nvidia.com/gpu"}]}
    pod = {"metadata": {"name": "train"}, "spec": {"nodeName": "gpu-node", "containers": [{"name": "work"}]},
           "status": {"extendedResourceClaimStatus": special}}
    assert dra.pod_claim_names(pod) == ["train-extended-resources-x1"]
    assert DraKubelet.has_claims(pod)
    named = {**pod, "spec": {**pod["spec"], "resourceClaims": [{"name": "mine", "resourceClaimName": "own"}]}}
    assert dra.pod_claim_names(named) == ["own", "train-extended-resources-x1"]
    assert not DraKubelet.has_claims({**pod, "status": {}})


def _check_obj(kind: str, name: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "gpushare-share-check", "uid": f"uid-{name}",
                                       "labels": {pilot.CHECK_LABEL: "gpu-node"}}}


def rollback_read(node: dict[str, Any], claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    pods = [_check_obj("Pod", f"gpushare-dra-pilot-gpu-node-{i}") for i in range(4)]
    return {"node": node, "claims": claims or [], "check_pods": pods, "records": enable_records(node),
            "check_claims": [_check_obj("ResourceClaim", "gpushare-dra-pilot-gpu-node")], "records_namespace": {}}


def test_the_rollback_restores_the_recorded_label_in_order() -> None:
    node = piloted(ready_node(gpus=2), {})
    result = rollback_plan(rollback_read(node), settings(), {}, NOW)
    assert result.refusals == []
    assert list(result.changes) == ["record", "cordon", "checks", "kubelet_plugin", "device_plugin", "uncordon", "finish"]
    assert [c.kind for c in result.changes["checks"]] == ["Pod"] * 4 + ["ResourceClaim"]
    assert result.changes["kubelet_plugin"][0].body == {"metadata": {"labels": {"nvidia.com/dra-kubelet-plugin": None}}}
    assert result.changes["device_plugin"][0].body == {"metadata": {"labels": {pilot.DEVICE_PLUGIN_LABEL: "true"}}}
    assert [c.action for c in result.changes["uncordon"]] == ["untaint", "merge"]
    assert result.changes["uncordon"][1].body["metadata"]["annotations"][pilot.MARK] is None
    assert result.expected["gpus"] == 2


def test_the_rollback_marks_the_nodes_enable_rolled_back() -> None:
    enable = pilot.plan(facts(nodes=[ready_node()], driver=driver()), read(ready_node()), settings(), {}, NOW)
    record = enable.changes["record"][0].body
    node = piloted(ready_node(), {})
    node["metadata"]["annotations"][pilot.MARK] = json.dumps({"device_plugin": "true", "run": enable.record})
    rolled = rollback_plan({**rollback_read(node), "records": [record]}, settings(), {}, NOW)
    assert [(c.name, c.body["metadata"]["annotations"]["gpushare.io/state"]) for c in rolled.changes["finish"]] == [
        (enable.record, "rolled-back"), (rolled.record, "complete")]


def test_a_claim_the_runbooks_did_not_create_on_the_pool_refuses_the_rollback() -> None:
    theirs = _claim([("gpu.nvidia.com", "gpu-node", "gpu-0")], [], {})
    theirs["metadata"] = {"name": "train", "namespace": "team-a"}
    theirs["status"]["reservedFor"] = [{"resource": "pods", "name": "trainer-0", "uid": "x"}]
    elsewhere = _claim([("gpu.nvidia.com", "gpu-node-2", "gpu-0")], [], {})
    elsewhere["metadata"] = {"name": "other", "namespace": "team-b"}
    result = rollback_plan(rollback_read(piloted(ready_node(), {}), [theirs, elsewhere]), settings(), {}, NOW)
    assert result.changes == {}
    assert result.refusals == ["gpu-node: 1 claim(s) the runbooks did not create are allocated from its pool: "
                               "team-a/train (pods trainer-0). Their owners move them first (delete the pods, then the "
                               "claims), then run this again. Nothing was changed."]


def test_a_rolled_back_node_plans_nothing() -> None:
    read = {**rollback_read(ready_node()), "check_pods": [], "check_claims": []}
    result = rollback_plan(read, settings(), {}, NOW)
    assert result.changes == {} and result.lines[0].startswith("Nothing to do: gpu-node is not in the DRA pilot")


def test_dcgm_uuids_are_read_from_either_node_label_spelling() -> None:
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"UUID": gpu_uuid("gpu-node", 1), "hostname": "gpu-node"}, "value": [1, "80000"]},
        {"metric": {"UUID": gpu_uuid("gpu-node", 0), "Hostname": "gpu-node"}, "value": [1, "80000"]}]}}
    assert dcgm.uuids_of(prometheus.result(answer)[1]) == sorted([gpu_uuid("gpu-node", 0), gpu_uuid("gpu-node", 1)])
    assert 'Hostname=~"gpu-node"' in dcgm.query("gpu-node") and 'hostname=~"gpu-node"' in dcgm.query("gpu-node")


def test_the_plans_hand_ansible_changes_that_gpushare_apply_reads_back() -> None:
    enable = plan_of(ready_node(gpus=2))
    rollback = rollback_plan(rollback_read(piloted(ready_node(), {})), settings(), {}, NOW)
    verify = verify_plan("gpu-node", 1, settings())
    for made, handed in [(enable.changes, enable.as_dict()["changes"]), (rollback.changes, rollback.as_dict()["changes"]),
                         ({"create": verify.create, "cleanup": verify.cleanup}, verify.as_dict())]:
        assert {step: [Change.from_dict(c) for c in handed[step]] for step in made} == made


def _marked(mark: Any, records: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A node the enable left cordoned and switched over, with `mark` (a text, or an object written as JSON)."""
    node = piloted(ready_node(), {})
    node["metadata"]["annotations"][pilot.MARK] = mark if isinstance(mark, str) else json.dumps(mark)
    return node, records if records is not None else [enable_record("gpushare-run-enable-dra-pilot-rec")]


RUN = "gpushare-run-enable-dra-pilot-rec"
FORGED = {
    "not JSON": ("{device_plugin: true", "cannot be read: it is not JSON"),
    "oversized": (json.dumps({"device_plugin": "true", "run": RUN, "x": "a" * 300_000}), "more than the 262144 allowed"),
    "nested": ("[" * 100 + "]" * 100, "nests deeper than 64 levels"),
    "a list": ("[]", "it is a JSON list, not an object"),
    "a field the enable never writes": ({"device_plugin": "true", "run": RUN, "owner": "x"}, "holds owner"),
    "a value the rollback would restore that the enable never saw": (
        {"device_plugin": "paused-for-mig-change", "run": RUN}, "device_plugin 'paused-for-mig-change' is none of"),
    "a taint_added that is text": ({"device_plugin": "true", "run": RUN, "taint_added": "no"}, "taint_added is a str"),
    "a run that is no record": ({"device_plugin": "true", "run": "kube-root-ca.crt"}, "names no run record"),
}


@pytest.mark.parametrize("which", FORGED)
@pytest.mark.parametrize("runbook", ["enable", "rollback"])
def test_a_forged_mark_is_refused_before_any_write(which: str, runbook: str) -> None:
    """The mark is read as the time-slicing records are: bounded (gpushare.bounded), typed, every field known."""
    raw, why = FORGED[which]
    node, records = _marked(raw)
    result = (plan_of(node) if runbook == "enable" else
              rollback_plan({**rollback_read(node), "records": records}, settings(), {}, NOW))
    assert result.changes == {}
    (refusal,) = result.refusals
    assert refusal.startswith(f"The annotation {pilot.MARK} of node gpu-node cannot be read: "), refusal
    assert why in refusal and refusal.endswith("Nothing was changed."), refusal


def _foreign_record(**changes: Any) -> dict[str, Any]:
    record = enable_record(RUN)
    record["metadata"]["labels"].update(changes.pop("labels", {}))
    record["data"].update(changes.pop("data", {}))
    return record


RECORDS = {
    "no record at all": ([], "which does not exist"),
    "a record written by another identity (not the runbooks' label)": (
        [_foreign_record(labels={"app.kubernetes.io/managed-by": "someone-else"})], "which is not labelled"),
    "an oversized record": ([_foreign_record(data={"intent.json": " " * 300_000})], "which cannot be read"),
    "a record of another runbook": ([_foreign_record(labels={"gpushare.io/run": "enable-timeslicing"},
                                                     data={"intent.json": json.dumps({"runbook": "enable-timeslicing"})})],
                                    "which is no enable-dra-pilot record of that node"),
    "a record that saw another label": ([enable_record(RUN, device_plugin="false")], "which recorded "
                                        "nvidia.com/gpu.deploy.device-plugin=false, the mark true"),
}


@pytest.mark.parametrize("which", RECORDS)
@pytest.mark.parametrize("runbook", ["enable", "rollback"])
def test_a_mark_its_run_record_does_not_vouch_for_is_refused_before_any_write(which: str, runbook: str) -> None:
    records, why = RECORDS[which]
    node, _ = _marked({"device_plugin": "true", "run": RUN})
    if runbook == "enable":
        result = pilot.plan(facts(nodes=[node], pods=[], driver=driver()), {**read(node), "records": records},
                            settings(), {}, NOW)
    else:
        result = rollback_plan({**rollback_read(node), "records": records}, settings(), {}, NOW)
    assert result.changes == {}
    (refusal,) = result.refusals
    assert refusal.startswith(f"Node gpu-node's {pilot.MARK} names run record gpushare-system/{RUN}, "), refusal
    assert why in refusal and refusal.endswith("Nothing was changed."), refusal


def test_a_deviceclass_the_identity_may_not_keep_is_refused_before_the_cluster_is_judged() -> None:
    node = ready_node()
    denied = {"class_get": {"allowed": False, "reason": ""}, "class_update": {"allowed": False, "reason": ""}}
    result = pilot.plan(facts(nodes=[node], driver=driver()), read(node), settings(), {}, NOW, denied)
    assert result.changes == {}
    assert result.refusals == [
        "The runbook identity may not get or update DeviceClass gpu-pilot.gpushare.io: deploy/rbac/52-dra-pilot.yaml (the "
        "ClusterRole gpushare-dra-pilot) names its DeviceClass by name. Add gpu-pilot.gpushare.io to its resourceNames, and "
        "to the admission policy gpushare-runbook-deviceclasses of deploy/rbac/51-dra-readiness.yaml, and apply them as an "
        "administrator; or keep the default dra_pilot_class_name. Nothing was changed."]
    allowed = {key: {"allowed": True, "reason": ""} for key in denied}
    assert pilot.plan(facts(nodes=[node], driver=driver()), read(node), settings(), {}, NOW, allowed).refusals == []


def test_the_preflight_dry_runs_every_write_whose_object_is_there_in_order() -> None:
    result = plan_of(ready_node()).as_dict()
    changes = admission.dry_run_changes(result)
    assert [(c["action"], c["kind"]) for c in changes] == [
        ("create", "ConfigMap"), ("merge", "Node"), ("merge", "Node"), ("merge", "Node"), ("create", "DeviceClass"),
        ("taint", "Node"), ("merge", "Node")]
    assert result["changes"]["finish"][0] not in changes  # it marks the run's record, not there before the run


@pytest.mark.parametrize(("said", "file"), [
    ("deviceclasses.resource.k8s.io \"team.example.com\" is forbidden: ValidatingAdmissionPolicy "
     "'gpushare-runbook-deviceclasses' with binding 'gpushare-runbook-deviceclasses' denied request: ...",
     "deploy/rbac/51-dra-readiness.yaml"),
    ("nodes \"gpu-node\" is forbidden: ValidatingAdmissionPolicy 'gpushare-runbook-nodes' with binding "
     "'gpushare-runbook-nodes' denied request: the runbook identity may not change metadata.labels example.com/dra",
     "deploy/rbac/60-admission-policies.yaml"),
    ("deviceclasses.resource.k8s.io \"x\" is forbidden: User \"gpushare-runbook\" cannot update resource",
     "deploy/rbac/52-dra-pilot.yaml"),
])
def test_a_denied_dry_run_is_refused_naming_the_object_the_denial_and_the_file_to_edit(said: str, file: str) -> None:
    # as Ansible registers it with failed_when: false, which sets failed to false
    refusal = admission.denial({"failed": False, "failed_change": "DeviceClass team.example.com", "reason": f"403 {said}",
                                "msg": "create of DeviceClass team.example.com failed", "written": []})
    assert refusal.startswith(f"The runbook identity would be denied a write of this run: DeviceClass team.example.com: "
                              f"403 {said} (a server-side dry run, which stored nothing). Edit {file}"), refusal
    assert refusal.endswith("Nothing was changed.")
    assert admission.denial({"changed": False, "failed": False, "outcomes": ["would merge Node gpu-node"]}) == ""
    assert admission.denial({"skipped": True, "changed": False}) == ""
