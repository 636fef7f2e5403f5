"""The MIG runbooks' plan (gpushare.mig.plan) on clusters built in memory: every refusal before a
write, the ordered changes, what the verify must find, the nothing-to-do runs, and the rollback's
target."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import yaml

from gpushare.mig.plan import advertised, plan
from gpushare.mig.settings import ENABLE, MARK, ROLLBACK, MigSettings
from gpushare.model.node import unpacked
from gpushare.runbook.records import Intent, Record, new_record
from gpushare.runbook.state import ClusterState

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
WHO = {"command": "ansible-playbook playbooks/enable-mig.yml -l gpu-node-mig", "user": "alice"}
A100 = "NVIDIA-A100-SXM4-40GB"
CONFIG = yaml.safe_dump({"version": "v1", "mig-configs": {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    "all-3g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
    "all-2g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.20gb": 3}}],
    "all-balanced": [{"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
                      "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}],
}})


def gpu_node(name: str = "gpu-node-mig", config: str = "all-disabled", state: str = "success", gpus: int = 4,
             product: str = A100, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             unschedulable: bool = False, gpu: int | None = None) -> dict[str, Any]:
    count = gpus if config == "all-disabled" else gpus * 7
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {}), "labels": {
            "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count), "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.product": product if config == "all-disabled" else f"{product}-MIG-1g.5gb",
            "nvidia.com/gpu.memory": "40960", "nvidia.com/mig.capable": "true", "nvidia.com/mig.config": config,
            "nvidia.com/mig.config.state": state, "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu.deploy.dcgm-exporter": "false", **(labels or {})}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"capacity": {"nvidia.com/gpu": str(gpu if gpu is not None else count)},
                   "allocatable": {"nvidia.com/gpu": str(gpu if gpu is not None else count)}},
    }


def configmap(name: str, text: str = CONFIG, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}}, "data": {"config.yaml": text}}


def state(nodes: list[dict[str, Any]] | None = None, configmaps: list[dict[str, Any]] | None = None,
          strategy: str | None = "single", mig_manager: dict[str, Any] | None = None) -> ClusterState:
    spec: dict[str, Any] = {"migManager": mig_manager or {"enabled": True, "config": {"default": "all-disabled"}}}
    if strategy:
        spec["mig"] = {"strategy": strategy}
    return ClusterState.of({
        "namespace": {"metadata": {"name": "gpu-operator"}},
        "clusterpolicy": {"metadata": {"name": "cluster-policy"}, "spec": spec},
        "nodes": nodes if nodes is not None else [gpu_node(), gpu_node("gpu-node", product="NVIDIA-H100-80GB-HBM3",
                                                                           gpus=1)],
        "configmaps": [c for c in configmaps if not Record.is_record(c)] if configmaps is not None else [
            configmap("default-mig-parted-config")],
        "records_namespace": {"metadata": {"name": "gpushare-system"}},
        "records": [c for c in configmaps or [] if Record.is_record(c)],
        "daemonsets": [{"metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-operator"}}],
        "pods": [], "lease": None,
    })


def settings(runbook: str = ENABLE, config: str = "all-1g.5gb", **values: Any) -> MigSettings:
    return MigSettings.of(runbook, {"configs": {"gpu-node-mig": config}, "namespace": "gpu-operator",
                                    "clusterpolicy_name": "cluster-policy", **values})


def pod(name: str, resource: str = "nvidia.com/gpu", owner: bool = True, node: str = "gpu-node-mig",
        volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "team", "uid": f"uid-{name}"}
    if owner:
        metadata["ownerReferences"] = [{"kind": "ReplicaSet", "name": "infer-5d4f", "uid": "rs", "controller": True}]
    return {"metadata": metadata, "status": {"phase": "Running"}, "spec": {
        "nodeName": node, "volumes": volumes or [],
        "containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]}}


def enable(cluster: ClusterState | None = None, pods: list[dict[str, Any]] | None = None, **values: Any) -> dict[str, Any]:
    return plan(cluster or state(), pods or [], settings(**values), ["gpu-node-mig"], WHO, NOW).as_dict()


def refused(result: dict[str, Any], text: str) -> None:
    assert result["refusals"], result["lines"]
    joined = " ".join(result["refusals"])
    assert text in joined, joined
    assert all(r.endswith("Nothing was changed.") for r in result["refusals"])
    assert not result["writes"] and result["changes"] == {}


# ---- the enable ------------------------------------------------------------------------------------
def test_the_changes_in_order_record_cordon_label_uncordon() -> None:
    result = enable()
    assert result["refusals"] == [] and result["nodes"] == ["gpu-node-mig"] and result["cordons"] == ["gpu-node-mig"]
    changes = result["changes"]
    record = changes["record"][0]["body"]
    assert record["metadata"]["name"].startswith("gpushare-run-enable-mig-20261201t090000z-")
    assert json.loads(record["data"]["intent.json"])["node_labels"]["gpu-node-mig"]["nvidia.com/mig.config"] == "all-disabled"
    cordon = changes["cordon"][0]["body"]
    assert cordon["spec"] == {"unschedulable": True}
    assert cordon["metadata"]["annotations"]["gpushare.io/cordoned-by"] == ENABLE
    assert json.loads(cordon["metadata"]["annotations"][MARK])["previous"] == "all-disabled"
    assert changes["reconfigure"][0]["body"] == {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.5gb"}}}
    assert changes["uncordon"][0]["body"] == {"metadata": {"annotations": {"gpushare.io/cordoned-by": None}},
                                              "spec": {"unschedulable": None}}
    assert [c["body"]["metadata"]["annotations"]["gpushare.io/state"] for c in changes["finish"]] == ["complete"]
    assert result["report_file"] == "enable-mig-20261201T090000Z-gpu-node-mig.md"


def test_what_the_verify_must_find_under_the_single_strategy() -> None:
    expected = enable()["expected"]
    target = expected["targets"]["gpu-node-mig"]
    assert target["resources"] == {"nvidia.com/gpu": 28}
    assert target["product"] == f"{A100}-MIG-1g.5gb"
    assert target["deploy"] == {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "false"}
    assert set(unpacked(expected["bystanders"])) == {"gpu-node"}


def test_the_plan_prints_the_resource_names_and_the_fragmentation() -> None:
    lines = "\n".join(enable()["lines"])
    assert "advertises afterwards: nvidia.com/gpu 28, product NVIDIA-A100-SXM4-40GB-MIG-1g.5gb" in lines
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in lines
    assert "1g.5gb     4.75 GiB   0       28" in lines and "whole GPU  40.00 GiB  4       0" in lines
    assert "Not touched: gpu-node" in lines


def test_mixed_strategy_advertises_each_profile() -> None:
    result = enable(state(strategy="mixed"), config="all-balanced")
    assert result["expected"]["targets"]["gpu-node-mig"]["resources"] == {
        "nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 8, "nvidia.com/mig-2g.10gb": 4, "nvidia.com/mig-3g.20gb": 4}
    assert result["expected"]["targets"]["gpu-node-mig"]["product"] == A100


def test_advertised_with_mig_off_and_partly_on() -> None:
    assert advertised([None] * 4, "single") == {"nvidia.com/gpu": 4}
    assert advertised([None, {"3g.20gb": 2}], "mixed") == {"nvidia.com/gpu": 1, "nvidia.com/mig-3g.20gb": 2}


def test_the_workloads_are_placed_and_printed() -> None:
    workloads = [{"name": "llm-13b", "memory_gib": 12, "headroom": 0.2, "replicas": 2}]
    lines = "\n".join(enable(state(strategy="mixed"), config="all-balanced", workloads=workloads)["lines"])
    assert "workloads: 1 of 1 listed workload(s) fit an instance" in lines
    assert "llm-13b   14.4 GiB = 12 GiB + 20 %  3g.20gb" in lines


def test_nothing_to_do_when_the_node_runs_the_config() -> None:
    result = enable(state([gpu_node(config="all-1g.5gb")]))
    assert result["refusals"] == [] and not result["writes"] and result["changes"] == {}
    assert result["lines"] == ["Nothing to do: gpu-node-mig runs MIG config all-1g.5gb "
                               "(nvidia.com/mig.config.state=success). Nothing was changed."]


def test_a_node_cordoned_by_someone_else_stays_cordoned() -> None:
    result = enable(state([gpu_node(unschedulable=True)]))
    assert result["cordons"] == [] and "spec" not in result["changes"]["cordon"][0]["body"]
    assert result["changes"]["uncordon"] == []
    assert "already cordoned by someone else (stays so)" in "\n".join(result["lines"])


def test_a_run_stopped_after_the_label_is_finished_by_a_re_run() -> None:
    mark = json.dumps({"previous": "all-disabled", "config": "all-1g.5gb", "gpus": 4, "run": "gpushare-run-x"})
    node = gpu_node(config="all-1g.5gb", state="pending", unschedulable=True, gpu=4,
                    annotations={"gpushare.io/cordoned-by": ENABLE, MARK: mark})
    result = enable(state([node]))
    assert result["refusals"] == [] and result["changes"]["reconfigure"] == [] and result["cordons"] == ["gpu-node-mig"]
    assert json.loads(result["changes"]["cordon"][0]["body"]["metadata"]["annotations"][MARK])["run"] == "gpushare-run-x"


def test_gpu_pods_are_evicted_once_the_window_is_confirmed() -> None:
    pods = [pod("infer-1"), pod("infer-2", "nvidia.com/gpu.shared"), pod("elsewhere", node="gpu-node"),
            pod("cpu-only", "cpu")]
    result = enable(pods=pods, confirm_eviction_window=True)
    assert result["refusals"] == [] and "evict 1 GPU pod(s) (team/infer-1)" in "\n".join(result["lines"])
    assert result["resources"] == ["nvidia.com/gpu"]


# ---- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("cluster", "values", "text"), [
    pytest.param(None, {"config": "all-9g.99gb"}, "MIG config 'all-9g.99gb' is not in ConfigMap "
                 "gpu-operator/default-mig-parted-config (the GPU Operator's default). The configs there that apply to "
                 "its NVIDIA-A100-SXM4-40GB GPUs: all-1g.5gb, all-3g.20gb, all-balanced, all-disabled", id="unknown-config"),
    pytest.param(None, {"config": "all-2g.20gb"}, "2g.20gb is not a MIG profile of NVIDIA-A100-SXM4-40GB",
                 id="config-for-another-gpu"),
    pytest.param(None, {"config": "all-balanced"}, "the ClusterPolicy's MIG strategy is single", id="two-profiles-single"),
    pytest.param(None, {"config": ""}, "No MIG config given for gpu-node-mig", id="no-config"),
    pytest.param(None, {"config": "all 1g"}, "is not a valid node label value", id="config-not-a-label"),
    pytest.param(state(strategy=None), {}, "spec.mig.strategy unset", id="no-strategy"),
    pytest.param(state(mig_manager={"enabled": False}), {}, "The MIG manager is disabled", id="mig-manager-off"),
    pytest.param(state(configmaps=[]), {}, "no mig-parted config: ConfigMap gpu-operator/default-mig-parted-config "
                 "(the GPU Operator's default) does not exist", id="no-configmap"),
    pytest.param(state(mig_manager={"config": {"name": "team"}}), {}, "ConfigMap gpu-operator/team (named by the "
                 "ClusterPolicy (migManager.config.name)) does not exist", id="custom-configmap-missing"),
    pytest.param(state(configmaps=[configmap("default-mig-parted-config", "version: v1\nmig-configs: [")]), {},
                 "key config.yaml is not a config the MIG manager can read: error parsing config file: unmarshal error: "
                 "error converting YAML to JSON: yaml: line 2:", id="unreadable-config"),
    pytest.param(state(configmaps=[configmap("default-mig-parted-config", "version: v1\nmig-configs: {on: [{devices: all, "
                                                                        "mig-enabled: false}]}\n")]), {"config": "on"},
                 "MIG config 'on' is not in ConfigMap gpu-operator/default-mig-parted-config (the GPU Operator's default). "
                 "The configs there that apply to its NVIDIA-A100-SXM4-40GB GPUs: true. A key written on there is read by "
                 "mig-parted's YAML 1.1 as 'true': quote it in the file (\"on\").", id="yaml-1.1-boolean-name"),
    pytest.param(state([gpu_node(labels={"nvidia.com/mig.capable": "false"})]), {}, "gpu-node-mig is not MIG-capable",
                 id="not-capable"),
    pytest.param(state([gpu_node(labels={"nvidia.com/gpu.sharing-strategy": "time-slicing",
                                         "nvidia.com/gpu.replicas": "2"})]), {}, "gpu-node-mig is time-sliced",
                 id="time-sliced"),
    pytest.param(state([gpu_node(config="all-1g.5gb", state="failed")]), {},
                 "The MIG manager already failed to apply all-1g.5gb on gpu-node-mig", id="already-failed"),
    pytest.param(state([gpu_node(config="all-3g.20gb", state="pending")]), {},
                 "The MIG manager is still applying all-3g.20gb", id="other-change-in-flight"),
    pytest.param(state([]), {}, "gpu-node-mig is not a GPU node of this cluster (no such node)", id="no-node"),
    pytest.param(None, {"workloads": [{"name": "llm", "memory_gib": 12, "headroom": 0.2}, {"name": "xl", "memory_gib": 5}]},
                 "llm (needs 14.4 GiB = 12 GiB + 20 %), xl (needs 5 GiB) fit no instance of all-1g.5gb (the largest: "
                 "1g.5gb, 4.75 GiB). 0 of 2 listed workload(s) fit an instance. Configs of ConfigMap "
                 "gpu-operator/default-mig-parted-config that fit every listed workload: all-3g.20gb", id="unfit"),
    pytest.param(None, {"workloads": [{"name": "llm", "memory_gib": 12, "headroom": 20}]}, "headroom is a fraction",
                 id="headroom-percent"),
])
def test_refusals(cluster: ClusterState | None, values: dict[str, Any], text: str) -> None:
    refused(enable(cluster, **values), text)


@pytest.mark.parametrize(("pods", "values", "text"), [
    pytest.param([pod("infer-1"), pod("infer-2")], {}, "2 pod(s) use the GPUs of gpu-node-mig (team/infer-1, "
                 "team/infer-2)", id="no-confirmation"),
    pytest.param([pod("bare", owner=False)], {"confirm_eviction_window": True}, "Pod team/bare uses a GPU of gpu-node-mig "
                 "and has no controller", id="no-controller"),
    pytest.param([pod("scratch", volumes=[{"name": "s", "emptyDir": {}}])], {"confirm_eviction_window": True},
                 "uses an emptyDir volume", id="emptydir"),
    pytest.param([pod("infer-1")], {"confirm_eviction_window": True, "drain_timeout": 20},
                 "Pod team/infer-1 may take 30 s to stop once evicted (its terminationGracePeriodSeconds), and the "
                 "drain waits at most 20 s (mig_drain_timeout). Raise -e mig_drain_timeout above 30", id="grace-period"),
    pytest.param([pod("infer-1")], {"confirm_eviction_window": True, "drain_grace_period": 400},
                 "may take 400 s to stop once evicted (mig_drain_grace_period)", id="grace-period-asked-for"),
])
def test_pod_refusals(pods: list[dict[str, Any]], values: dict[str, Any], text: str) -> None:
    refused(enable(pods=pods, **values), text)


def test_the_physical_gpus_of_a_partitioned_node_without_mark() -> None:
    result = plan(state([gpu_node(config="all-1g.5gb")]), [], settings(config="all-3g.20gb"), ["gpu-node-mig"], WHO, NOW)
    assert result.expected["targets"]["gpu-node-mig"]["resources"] == {"nvidia.com/gpu": 8}  # 28 / 7 = 4 GPUs x 2


# ---- the rollback -------------------------------------------------------------------------------------------
def rollback(cluster: ClusterState, **values: Any) -> dict[str, Any]:
    return plan(cluster, [], settings(ROLLBACK, **values), ["gpu-node-mig"], WHO, NOW).as_dict()


def test_the_rollback_goes_back_to_the_config_before_the_first_enable() -> None:
    mark = json.dumps({"previous": "all-3g.20gb", "config": "all-1g.5gb", "gpus": 4, "run": "r"})
    result = rollback(state([gpu_node(config="all-1g.5gb", annotations={MARK: mark})]))
    assert result["changes"]["reconfigure"][0]["body"]["metadata"]["labels"] == {"nvidia.com/mig.config": "all-3g.20gb"}
    assert result["changes"]["uncordon"][0]["body"]["metadata"]["annotations"] == {
        "gpushare.io/cordoned-by": None, MARK: None}
    assert result["expected"]["targets"]["gpu-node-mig"]["resources"] == {"nvidia.com/gpu": 8}


def test_without_a_mark_the_rollback_goes_to_whole_gpus_or_where_it_is_told() -> None:
    assert rollback(state([gpu_node(config="all-1g.5gb")]))["expected"]["targets"]["gpu-node-mig"]["config"] == "all-disabled"
    told = rollback(state([gpu_node(config="all-1g.5gb")]), rollback_to="all-3g.20gb")
    assert told["expected"]["targets"]["gpu-node-mig"]["config"] == "all-3g.20gb"


def test_the_rollback_marks_the_enable_runs_rolled_back() -> None:
    record = {"metadata": {"name": "gpushare-run-enable-mig-x", "labels": {"gpushare.io/run": ENABLE},
                           "annotations": {"gpushare.io/state": "complete"}},
              "data": {"intent.json": json.dumps({"runbook": ENABLE, "nodes": ["gpu-node-mig"]})}}
    result = rollback(state([gpu_node(config="all-1g.5gb")], [configmap("default-mig-parted-config"), record]))
    states = {c["name"]: c["body"]["metadata"]["annotations"]["gpushare.io/state"] for c in result["changes"]["finish"]}
    assert states["gpushare-run-enable-mig-x"] == "rolled-back" and list(states.values()).count("complete") == 1


def test_a_rollback_of_a_node_with_whole_gpus_has_nothing_to_do() -> None:
    result = rollback(state())
    assert not result["writes"] and result["lines"][0].startswith("Nothing to do: gpu-node-mig runs MIG config all-disabled")


def test_a_rollback_may_take_over_its_own_stalled_change() -> None:
    node = gpu_node(config="all-1g.5gb", state="pending", unschedulable=True, gpu=4,
                    annotations={"gpushare.io/cordoned-by": ENABLE})
    result = rollback(state([node]))
    assert result["refusals"] == [] and result["cordons"] == ["gpu-node-mig"]


# ---- the MIG manager's dead ends (mig-parted v0.15 pkg/mig/reconfigure, cmd/nvidia-mig-manager) ----------
PAUSED = "paused-for-mig-change"


def stuck_node() -> dict[str, Any]:
    return gpu_node(config="all-1g.5gb", state="pending", unschedulable=True, gpu=0,
                    annotations={"gpushare.io/cordoned-by": ENABLE},
                    labels={"nvidia.com/gpu.deploy.device-plugin": PAUSED, "nvidia.com/gpu.deploy.dcgm-exporter": "false"})


def run_record(started: dt.datetime) -> dict[str, Any]:
    intent = Intent(ENABLE, ["gpu-node-mig"], node_labels={"gpu-node-mig": {
        "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success",
        "nvidia.com/gpu.deploy.device-plugin": "true"}})
    return new_record("gpushare-run-enable-mig-20261201t083000z-abcd", "gpu-operator", intent, None, started, WHO)


def held_exporter() -> dict[str, Any]:
    return {"metadata": {"name": "nvidia-dcgm-exporter-x1", "namespace": "gpu-operator", "labels": {"app": "nvidia-dcgm-exporter"},
                         "deletionTimestamp": "2026-12-01T08:31:00Z"},
            "spec": {"nodeName": "gpu-node-mig"}, "status": {"phase": "Running"}}


def test_a_re_run_on_a_node_its_mig_manager_gave_up_on_says_how_to_get_out() -> None:
    """The MIG manager waits 5 minutes for its GPU clients, then leaves the node pending with them
    paused and does not look again until the label changes or its pod restarts: a re-run would wait
    for nothing. The run record says the run began more than the drain and that wait ago."""
    cluster = state([stuck_node()], [configmap("default-mig-parted-config"), run_record(NOW - dt.timedelta(minutes=11))])
    manager = {"metadata": {"name": "nvidia-mig-manager-abc", "namespace": "gpu-operator",
                            "labels": {"app": "nvidia-mig-manager"}}, "spec": {"nodeName": "gpu-node-mig"}}
    result = plan(cluster, [held_exporter(), manager], settings(), ["gpu-node-mig"], WHO, NOW).as_dict()
    message = " ".join(result["refusals"])
    assert "gpu-node-mig: the MIG manager gave up waiting for its GPU clients to stop and left " \
           "nvidia.com/mig.config.state=pending" in message
    assert "gpu-operator/nvidia-dcgm-exporter-x1 (terminating since 2026-12-01T08:31:00Z)" in message
    assert "kubectl -n gpu-operator delete pod nvidia-mig-manager-abc" in message
    assert "run record gpushare-run-enable-mig-20261201t083000z-abcd keeps the node as it was: " \
           "nvidia.com/gpu.deploy.device-plugin=true, nvidia.com/mig.config=all-disabled" in message
    recent = state([stuck_node()], [configmap("default-mig-parted-config"), run_record(NOW - dt.timedelta(minutes=9))])
    assert plan(recent, [], settings(), ["gpu-node-mig"], WHO, NOW).refusals == [], \
        "not certain yet (the drain may have taken 5 of those minutes): the re-run waits, and its wait tells"


def test_a_failed_mode_change_says_reboot_then_re_run() -> None:
    mark = json.dumps({"previous": "all-disabled", "config": "all-1g.5gb", "gpus": 4, "run": "r"})
    failed = state([gpu_node(config="all-1g.5gb", state="failed", annotations={MARK: mark})])
    message = refused_text(failed)
    assert "It turns MIG mode on or off" in message and "reboot gpu-node-mig" in message
    assert "turns MIG mode" not in refused_text(state([gpu_node(config="all-1g.5gb", state="failed")])), \
        "without the mark the config before is unknown"
    planned = enable(state([gpu_node()]))
    assert planned["expected"]["targets"]["gpu-node-mig"]["mode_change"] is True
    assert enable(state([gpu_node(config="all-3g.20gb")]))["expected"]["targets"]["gpu-node-mig"]["mode_change"] is False


def refused_text(cluster: ClusterState) -> str:
    result = enable(cluster)
    assert result["refusals"]
    return " ".join(result["refusals"])
