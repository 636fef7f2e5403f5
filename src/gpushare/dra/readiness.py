"""The readiness checks of the DRA pilot: each judges facts read once (gpushare.dra.probe) and says
PASS or FAIL with a one-line reason and, when it fails, the fix. The runbook writes nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare.dra.settings import DRIVER_GATES, Settings
from gpushare.model.node import Node
from gpushare.model.pods import TERMINAL
from gpushare.yamltext import safe_load

MINIMUM = (1, 34, 2)
DRA_RESOURCES = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")
GPU_PREFIX = "nvidia.com/gpu"
GATE = "DRAExtendedResource"
GATED = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
KUEUE_GATE = "DynamicResourceAllocation"
KUEUE_EXTENDED_GATE = "DRAExtendedResources"  # Kueue 0.17: DRA devices asked for as extended resources


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    reason: str
    fix: str = ""

    @property
    def line(self) -> str:
        fix = f" Fix: {self.fix}" if not self.ok and self.fix else ""
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.reason}.{fix}"


def version(text: str) -> tuple[int, int, int] | None:
    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text or "")
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def _api(facts: dict[str, Any]) -> Check:
    served = facts.get("dra_resources")
    missing = [r for r in DRA_RESOURCES if r not in (served or [])]
    if served is None:
        return Check("api", False, "resource.k8s.io/v1 is not in discovery",
                     "enable the resource.k8s.io/v1 API (--runtime-config=resource.k8s.io/v1=true on the API server)")
    if missing:
        return Check("api", False, f"resource.k8s.io/v1 does not serve {', '.join(missing)}",
                     "enable the resource.k8s.io/v1 API and its resources on the API server")
    return Check("api", True, f"resource.k8s.io/v1 serves {', '.join(DRA_RESOURCES)}")


def _version(facts: dict[str, Any]) -> Check:
    found, text = version(facts.get("version", "")), facts.get("version") or "unknown"
    wanted = ".".join(map(str, MINIMUM))
    if found is None or found < MINIMUM:
        return Check("version", False, f"Kubernetes {text} is older than {wanted}",
                     f"upgrade the control plane to {wanted} or later")
    return Check("version", True, f"Kubernetes {text} (>= {wanted})")


def _node(facts: dict[str, Any]) -> Check:
    targets = facts.get("targets") or []
    if len(targets) != 1:
        return Check("node", False, f"{len(targets)} nodes targeted ({', '.join(targets) or 'none'}); the pilot "
                     "runs on exactly one", "choose the one pilot node with -l NODE")
    name = targets[0]
    found = [Node(raw) for raw in facts.get("nodes") or [] if raw["metadata"]["name"] == name]
    if not found:
        return Check("node", False, f"{name} is not a node of this cluster", "give -l the name of a Kubernetes node")
    node = found[0]
    if not node.ready:
        return Check("node", False, f"{name} is not Ready", f"bring {name} back (kubectl describe node {name})")
    gpus = node.gpus or node.capacity(GPU_PREFIX)  # GFD's count: a time-sliced node advertises replicas
    if not node.gpu_present or not gpus:
        return Check("node", False, f"{name} has no GPUs (label nvidia.com/gpu.present, capacity {GPU_PREFIX})",
                     "choose a GPU node with -l NODE")
    return Check("node", True, f"{name} is Ready with {gpus} GPUs")


def _holds(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    held = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        held += [k for part in ("requests", "limits") for k in (resources.get(part) or {}) if k.startswith(GPU_PREFIX)]
        if resources.get("claims"):
            held.append("a resource claim")
    if spec.get("resourceClaims"):
        held.append("a resource claim")
    return sorted(set(held))


def _pods(facts: dict[str, Any]) -> Check:
    holding = []
    for pod in facts.get("pods") or []:
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        held = _holds(pod)
        if held:
            holding.append(f"{meta.get('namespace')}/{meta['name']} ({', '.join(held)})")
    nodes = ", ".join(facts.get("targets") or [])
    if holding:
        count = f"1 pod on {nodes} holds" if len(holding) == 1 else f"{len(holding)} pods on {nodes} hold"
        return Check("pods", False, f"{count} GPUs or claims: {', '.join(holding[:5])}"
                     + (", ..." if len(holding) > 5 else ""),
                     "move them off the pilot node (kubectl drain, or wait for them to end), or choose another node")
    return Check("pods", True, f"no pod on {nodes} holds {GPU_PREFIX}* or a claim")


def _timeslicing(facts: dict[str, Any]) -> Check:
    policies = facts.get("clusterpolicies") or []
    default = next((((p.get("spec") or {}).get("devicePlugin") or {}).get("config") or {} for p in policies), {})
    in_config, names = [], []
    for raw in facts.get("nodes") or []:
        node = Node(raw)
        why = [f"label nvidia.com/device-plugin.config={node.config_label}"] if node.config_label else []
        why += [f"annotation {k}" for k in node.annotations if k == "gpushare.io/timeslicing"]
        if node.strategy not in ("none", ""):
            why.append(f"sharing strategy {node.strategy}")
        if why:
            in_config.append(f"{node.name} ({', '.join(why)})")
            names.append(node.name)
    if in_config:
        return Check("timeslicing", False, f"{', '.join(in_config)} {'is' if len(names) == 1 else 'are'} in the "
                     "time-slicing config",
                     f"roll it back first: ansible-playbook playbooks/rollback-timeslicing.yml -l {','.join(names)}")
    if default.get("default"):
        return Check("timeslicing", False, f"the ClusterPolicy's devicePlugin.config.default is "
                     f"{default['default']!r}: every node without a config label shares its GPUs",
                     "remove spec.devicePlugin.config.default from the ClusterPolicy")
    return Check("timeslicing", True, f"{', '.join(facts.get('targets') or [])} not in the time-slicing config")


def _operator(facts: dict[str, Any]) -> Check:
    policies, clusters = facts.get("clusterpolicies"), facts.get("gpuclusters")
    if clusters:
        return Check("operator", False, f"GPUCluster {', '.join(clusters)} exists; the pilot works with a ClusterPolicy "
                     "only", "manage the GPU Operator with a ClusterPolicy and delete the GPUCluster")
    if not policies:
        return Check("operator", False, "no ClusterPolicy" + (" (its CRD is not installed)" if policies is None else ""),
                     "install the GPU Operator (it creates the ClusterPolicy)")
    return Check("operator", True, f"ClusterPolicy {policies[0]['metadata']['name']}, no GPUCluster")


def _gates(facts: dict[str, Any]) -> Check:
    gates = facts.get("gates") or {}
    on = [name for name in GATED if (gates.get(name) or {}).get("enabled") is True]
    unread = [f"{name} ({gates[name]['error']})" for name in GATED if (gates.get(name) or {}).get("error")]
    fix = (f"turn {GATE} on in kube-apiserver, kube-scheduler and kube-controller-manager alike "
           f"(--feature-gates={GATE}=true), or set dra_pilot_extended_resource=false")
    if unread:
        return Check("extended-resource gate", False, f"cannot read {GATE} of {'; '.join(unread)}",
                     "give dra_pilot_metrics_urls for kube-scheduler and kube-controller-manager (their /metrics), "
                     "readable by the runbook identity (get /metrics)")
    if len(on) == len(GATED):
        return Check("extended-resource gate", True, f"{GATE} is on in {', '.join(GATED)}")
    if on:
        off = [name for name in GATED if name not in on]
        return Check("extended-resource gate", False, f"{GATE} is half-enabled: on in {', '.join(on)}, "
                     f"off in {', '.join(off)}", fix)
    return Check("extended-resource gate", False, f"{GATE} is off (alpha in Kubernetes 1.34 and 1.35, off by default)",
                 fix)


def _device_class(facts: dict[str, Any], settings: Settings) -> Check:
    probe = facts.get("dry_run_class") or {}
    if probe.get("error"):
        return Check("device class", False, f"a dry-run DeviceClass was refused: {probe['error']}",
                     "let the runbook identity create DeviceClasses as a dry run (deploy/rbac/51-dra-readiness.yaml)")
    if probe.get("extended_resource_name") != settings.extended_resource_name:
        return Check("device class", False, "the API server dropped extendedResourceName from a dry-run DeviceClass",
                     f"turn {GATE} on in kube-apiserver")
    return Check("device class", True, f"a dry-run DeviceClass keeps extendedResourceName {settings.extended_resource_name}")


def _allows(rule: dict[str, Any], group: str, resource: str, verb: str) -> bool:
    return (any(g in ("*", group) for g in rule.get("apiGroups") or []) and not rule.get("resourceNames")
            and any(r in ("*", resource) for r in rule.get("resources") or [])
            and any(v in ("*", verb) for v in rule.get("verbs") or []))


def _scheduler(facts: dict[str, Any]) -> Check:
    roles = {r["metadata"]["name"]: r for r in facts.get("clusterroles") or []}
    bound = [b["roleRef"]["name"] for b in facts.get("clusterrolebindings") or []
             if b["roleRef"].get("kind") == "ClusterRole" and any(
                 s.get("kind") == "User" and s.get("name") == "system:kube-scheduler" for s in b.get("subjects") or [])]
    granting = [name for name in bound if any(_allows(rule, "resource.k8s.io", "resourceclaims", "create")
                                              for rule in (roles.get(name) or {}).get("rules") or [])]
    if granting:
        return Check("scheduler claims", True, f"system:kube-scheduler may create resourceclaims ({', '.join(granting)})")
    return Check("scheduler claims", False, "system:kube-scheduler may not create resourceclaims (its ClusterRoles: "
                 f"{', '.join(bound) or 'none'})", f"turn {GATE} on in kube-apiserver (it then grants "
                 "system:kube-scheduler create on resourceclaims)")


def _container_gates(workload: dict[str, Any]) -> dict[str, str]:
    gates: dict[str, str] = {}
    pod = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in pod.get("containers") or []:
        texts = [a.split("=", 1)[1] for a in container.get("args") or [] if a.startswith("--feature-gates=")]
        texts += [e.get("value") or "" for e in container.get("env") or [] if e.get("name") == "FEATURE_GATES"]
        for text in texts:
            gates.update(dict(item.split("=", 1) for item in text.split(",") if "=" in item))
    return gates


def _driver(facts: dict[str, Any], settings: Settings) -> Check:
    gate = DRIVER_GATES[settings.sharing]
    workloads = facts.get("driver") or []
    if not workloads:
        return Check("driver gates", True, f"the DRA driver is not installed in {settings.driver_namespace} yet; "
                     f"install it with featureGates.{gate}=true")
    gates: dict[str, str] = {}
    for workload in workloads:
        gates.update(_container_gates(workload))
    if gates.get(gate) != "true":
        return Check("driver gates", False, f"the DRA driver in {settings.driver_namespace} runs without {gate}=true, "
                     f"which {settings.sharing} needs", f"upgrade the driver's chart with featureGates.{gate}=true")
    return Check("driver gates", True, f"the DRA driver runs with {gate}=true")


def _kueue(facts: dict[str, Any], settings: Settings) -> Check:
    namespace = settings.queue_namespace
    gates: dict[str, str] = {}
    for workload in facts.get("kueue") or []:
        gates.update(_container_gates(workload))
    config: dict[str, Any] = {}
    for configmap in facts.get("kueue_configmaps") or []:
        for text in (configmap.get("data") or {}).values():
            loaded = safe_load(text) if "deviceClassMappings" in text else None
            if isinstance(loaded, dict):
                config = loaded
    mapped = [name for m in ((config.get("resources") or {}).get("deviceClassMappings") or [])
              for name in m.get("deviceClassNames") or []]
    with_config = [t["metadata"]["name"] for t in facts.get("claim_templates") or []
                   if ((t.get("spec") or {}).get("spec") or {}).get("devices", {}).get("config")]
    problems, fixes = [], []
    wanted = [KUEUE_GATE, *([KUEUE_EXTENDED_GATE] if settings.extended_resource else [])]
    off = [gate for gate in wanted if gates.get(gate) != "true"]
    if off:
        problems.append(f"Kueue runs without {', '.join(f'{gate}=true' for gate in off)}")
        fixes.append(f"run Kueue with --feature-gates={','.join(f'{gate}=true' for gate in wanted)}")
    if settings.device_class not in mapped:
        problems.append(f"Kueue's resources.deviceClassMappings does not map {settings.device_class}")
        fixes.append(f"map {settings.device_class} in Kueue's configuration (resources.deviceClassMappings)")
    if with_config:
        problems.append(f"ResourceClaimTemplates {', '.join(with_config)} in {namespace} carry config, "
                        "which Kueue refuses")
        fixes.append("move the config out of the templates (into the DeviceClass)")
    if problems:
        return Check("kueue", False, "; ".join(problems), "; ".join(fixes))
    return Check("kueue", True, f"Kueue maps {settings.device_class}, runs with {', '.join(wanted)}, and the "
                 f"templates in {namespace} carry no config")


def checks(facts: dict[str, Any], settings: Settings) -> list[Check]:
    """Every check the readiness makes, in the order it prints them."""
    found = [_api(facts), _version(facts), _node(facts), _pods(facts), _timeslicing(facts), _operator(facts)]
    if settings.extended_resource:
        found += [_gates(facts), _device_class(facts, settings), _scheduler(facts)]
    found.append(_driver(facts, settings))
    if settings.queue_namespace:
        found.append(_kueue(facts, settings))
    return found


def report(facts: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`lines` (one a check), `failed` (the failing checks' lines) and `refusal` (empty when ready)."""
    found = checks(facts, settings)
    failed = [c.line for c in found if not c.ok]
    refusal = ""
    if failed:
        refusal = (f"The cluster is not ready for the DRA pilot: {len(failed)} of {len(found)} checks failed.\n"
                   + "\n".join(failed) + "\nNothing was changed.")
    return {"lines": [c.line for c in found], "failed": failed, "refusal": refusal}
