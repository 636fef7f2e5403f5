"""The DRA pilot's readiness checks (gpushare.dra.readiness) on facts as gpushare.dra.probe reads them."""

from __future__ import annotations

from typing import Any

import pytest

from gpushare_testbed.controlplane import feature_gates
from gpushare.dra.probe import gate_enabled
from gpushare.dra.readiness import DRA_RESOURCES, report
from gpushare.dra.settings import Settings
from tests.unit.cluster_objects import clusterpolicy, mark, node, workload_pod

READY = [{"type": "Ready", "status": "True"}]
METRICS = """# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="ALPHA"} 0
kubernetes_feature_enabled{name="DRAExtendedResource",stage="ALPHA"} %s
"""
SCHEDULER_ROLE = {"metadata": {"name": "system:kube-scheduler"}, "rules": [
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch", "update"]}]}
SCHEDULER_BINDING = {"metadata": {"name": "system:kube-scheduler"},
                     "roleRef": {"kind": "ClusterRole", "name": "system:kube-scheduler"},
                     "subjects": [{"kind": "User", "name": "system:kube-scheduler"}]}


def ready_node(name: str = "gpu-node", **kwargs: Any) -> dict[str, Any]:
    raw = node(name, **kwargs)
    raw["status"]["conditions"] = READY
    return raw


def facts(**overrides: Any) -> dict[str, Any]:
    found = {"targets": ["gpu-node"], "version": "v1.35.4", "dra_resources": sorted(DRA_RESOURCES),
             "nodes": [ready_node(gpus=4)], "pods": [], "clusterpolicies": [clusterpolicy()], "gpuclusters": None,
             "driver": [], "gates": {name: {"enabled": True} for name in
                                     ("kube-apiserver", "kube-scheduler", "kube-controller-manager")},
             "dry_run_class": {"extended_resource_name": "nvidia.com/gpu"},
             "clusterroles": [{**SCHEDULER_ROLE, "rules": [*SCHEDULER_ROLE["rules"], {
                 "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["create", "delete"]}]}],
             "clusterrolebindings": [SCHEDULER_BINDING]}
    return {**found, **overrides}


def failed(found: dict[str, Any], settings: Settings | None = None) -> list[str]:
    return report(found, settings or Settings())["failed"]


def test_a_ready_cluster_passes_every_check() -> None:
    result = report(facts(), Settings(extended_resource=True))
    assert result["failed"] == []
    assert result["refusal"] == ""
    assert [line.split(":")[0] for line in result["lines"]] == [
        "PASS api", "PASS version", "PASS node", "PASS pods", "PASS timeslicing", "PASS operator",
        "PASS extended-resource gate", "PASS device class", "PASS scheduler claims", "PASS driver gates"]
    assert "PASS node: gpu-node is Ready with 4 GPUs." in result["lines"]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"dra_resources": None}, "FAIL api: resource.k8s.io/v1 is not in discovery."),
    ({"dra_resources": ["deviceclasses"]}, "FAIL api: resource.k8s.io/v1 does not serve resourceclaims, "
                                           "resourceclaimtemplates, resourceslices."),
    ({"version": "v1.34.1"}, "FAIL version: Kubernetes v1.34.1 is older than 1.34.2."),
    ({"targets": []}, "FAIL node: 0 nodes targeted (none); the pilot runs on exactly one."),
    ({"targets": ["gpu-node", "gpu-node-2"]}, "FAIL node: 2 nodes targeted (gpu-node, gpu-node-2); the pilot runs on "
                                              "exactly one."),
    ({"nodes": []}, "FAIL node: gpu-node is not a node of this cluster."),
    ({"nodes": [node("gpu-node")]}, "FAIL node: gpu-node is not Ready."),
    ({"nodes": [ready_node(gpu=False)]}, "FAIL node: gpu-node has no GPUs"),
    ({"pods": [workload_pod("trainer", "gpu-node", resource="nvidia.com/gpu")]},
     "FAIL pods: 1 pod on gpu-node holds GPUs or claims: team-a/trainer (nvidia.com/gpu)."),
    ({"nodes": [ready_node(labels={"nvidia.com/device-plugin.config": "shared"})]},
     "FAIL timeslicing: gpu-node (label nvidia.com/device-plugin.config=shared) is in the time-slicing config."),
    ({"nodes": [ready_node(annotations=mark())]},
     "FAIL timeslicing: gpu-node (annotation gpushare.io/timeslicing) is in the time-slicing config."),
    ({"clusterpolicies": [clusterpolicy("time-slicing-config", "shared")]},
     "FAIL timeslicing: the ClusterPolicy's devicePlugin.config.default is 'shared'"),
    ({"clusterpolicies": None}, "FAIL operator: no ClusterPolicy (its CRD is not installed)."),
    ({"gpuclusters": ["gpu-cluster"]}, "FAIL operator: GPUCluster gpu-cluster exists"),
])
def test_each_failing_check_says_why_and_the_fix(overrides: dict[str, Any], expected: str) -> None:
    lines = failed(facts(**overrides))
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected)
    assert " Fix: " in lines[0]


def test_a_pod_holding_a_claim_or_a_finished_gpu_pod() -> None:
    claim = workload_pod("infer", "gpu-node", resource="cpu")
    claim["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    done = workload_pod("old", "gpu-node", resource="nvidia.com/gpu", phase="Succeeded")
    assert failed(facts(pods=[claim, done])) == [
        "FAIL pods: 1 pod on gpu-node holds GPUs or claims: team-a/infer (a resource claim). Fix: move them off "
        "the pilot node (kubectl drain, or wait for them to end), or choose another node"]


def test_the_half_enabled_gate_names_where_it_is_off() -> None:
    gates = {"kube-apiserver": {"enabled": False}, "kube-scheduler": {"enabled": True},
             "kube-controller-manager": {"enabled": False}}
    lines = failed(facts(gates=gates, dry_run_class={"extended_resource_name": None},
                         clusterroles=[SCHEDULER_ROLE]), Settings(extended_resource=True))
    assert lines[0].startswith("FAIL extended-resource gate: DRAExtendedResource is half-enabled: on in "
                               "kube-scheduler, off in kube-apiserver, kube-controller-manager. Fix: turn")
    assert lines[1].startswith("FAIL device class: the API server dropped extendedResourceName")
    assert lines[2].startswith("FAIL scheduler claims: system:kube-scheduler may not create resourceclaims "
                               "(its ClusterRoles: system:kube-scheduler)")


def test_a_gate_that_cannot_be_read_asks_for_the_metrics_url() -> None:
    gates = {"kube-apiserver": {"enabled": True}, "kube-scheduler": {"error": "no metrics URL given"},
             "kube-controller-manager": {"enabled": True}}
    assert failed(facts(gates=gates), Settings(extended_resource=True))[0].startswith(
        "FAIL extended-resource gate: cannot read DRAExtendedResource of kube-scheduler (no metrics URL given). "
        "Fix: give dra_pilot_metrics_urls")


def test_the_extended_resource_checks_only_when_wanted() -> None:
    assert failed(facts(gates={}, dry_run_class={}, clusterroles=[])) == []


def driver(gates: str) -> dict[str, Any]:
    return {"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": [
        {"name": "gpus", "env": [{"name": "FEATURE_GATES", "value": gates}]}]}}}}


def test_the_driver_runs_with_the_gate_the_sharing_needs() -> None:
    assert failed(facts(driver=[driver("TimeSlicingSettings=true")])) == []
    assert failed(facts(driver=[driver("TimeSlicingSettings=true")]), Settings(sharing="mps")) == [
        "FAIL driver gates: the DRA driver in nvidia-dra-driver-gpu runs without MPSSupport=true, which mps needs. "
        "Fix: upgrade the driver's chart with featureGates.MPSSupport=true"]


def test_kueue_needs_its_gate_the_class_mapping_and_templates_without_config() -> None:
    settings = Settings(queue_namespace="team-a")
    kueue = {"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "args": ["--feature-gates=DynamicResourceAllocation=true"]}]}}}}
    config = {"data": {"controller_manager_config.yaml":
                       "resources:\n  deviceClassMappings:\n  - name: whole-gpus\n    deviceClassNames: [gpu.nvidia.com]\n"}}
    template = {"metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}
    configured = {"metadata": {"name": "shared"}, "spec": {"spec": {"devices": {**template["spec"]["spec"]["devices"],
                                                                                "config": [{"opaque": {}}]}}}}
    assert failed(facts(kueue=[kueue], kueue_configmaps=[config], claim_templates=[template]), settings) == []
    assert failed(facts(kueue=[], kueue_configmaps=[], claim_templates=[template, configured]), settings) == [
        "FAIL kueue: Kueue runs without DynamicResourceAllocation=true; Kueue's resources.deviceClassMappings does not "
        "map gpu.nvidia.com; ResourceClaimTemplates shared in team-a carry config, which Kueue refuses. Fix: run Kueue "
        "with --feature-gates=DynamicResourceAllocation=true; map gpu.nvidia.com in Kueue's configuration "
        "(resources.deviceClassMappings); move the config out of the templates (into the DeviceClass)"]
    extended = Settings(queue_namespace="team-a", extended_resource=True)
    assert failed(facts(kueue=[kueue], kueue_configmaps=[config], claim_templates=[template]), extended) == [
        "FAIL kueue: Kueue runs without DRAExtendedResources=true. Fix: run Kueue with "
        "--feature-gates=DynamicResourceAllocation=true,DRAExtendedResources=true"]


def test_the_refusal_lists_every_failing_check_and_says_nothing_was_changed() -> None:
    refusal = report(facts(version="v1.33.0", targets=[]), Settings())["refusal"]
    assert refusal.splitlines()[0] == "The cluster is not ready for the DRA pilot: 2 of 7 checks failed."
    assert refusal.endswith("Nothing was changed.")


def test_the_gate_is_read_from_kubernetes_feature_enabled() -> None:
    assert gate_enabled(METRICS % "1", "DRAExtendedResource") is True
    assert gate_enabled(METRICS % "0", "DRAExtendedResource") is False
    assert gate_enabled(METRICS % "1", "DRAExtendedResourceX") is None


def test_settings_problems() -> None:
    assert Settings(sharing="mig", metrics_urls={"kube-proxy": "x"}).problems() == [
        "dra_pilot_sharing is 'mig'; give one of timeslicing, mps.",
        "dra_pilot_metrics_urls names kube-proxy; it takes kube-scheduler and kube-controller-manager only."]


def test_the_embedded_clusters_feature_gates_per_component() -> None:
    assert feature_gates("", []) == {}
    assert feature_gates("DRAExtendedResource=true", []) == {
        name: "DRAExtendedResource=true" for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")}
    assert feature_gates("", ["kube-scheduler:DRAExtendedResource=true"]) == {
        "kube-scheduler": "DRAExtendedResource=true"}
    assert feature_gates("A=true", ["kube-scheduler:A=false,B=true"])["kube-scheduler"] == "A=false,B=true"
    with pytest.raises(ValueError, match="names no component"):
        feature_gates("", ["kubelet:A=true"])
    with pytest.raises(ValueError, match="is not GATE=true or GATE=false"):
        feature_gates("A=on", [])
