"""Steps about the cluster and its nodes: what a node advertises and carries, the shared pool, the
GPU Operator's operands, and "exactly as before" judged independently of the runbooks' own code."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_bdd import given, parsers, then, when

from gpushare.k8s.session import ApiError, Session
from gpushare.model.node import Node, Pool
from gpushare.model.operands import DEVICE_PLUGIN, DRIVER, GFD, MPS, VALIDATOR, OperandPod
from gpushare.polling import wait_for
from gpushare.rbac import SERVICE_ACCOUNT_NAMESPACE, WRITE_MODEL
from gpushare_testbed.simulator import clusterpolicy as cp
from tests.support.cluster import REPO, RESET_TIMEOUT_S, Cluster
from tests.support.restore import unsettled

# Labels that change without any change to sharing: GFD stamps every start of its pod.
VOLATILE_LABELS = ("nvidia.com/gfd.timestamp",)
GPU_PRESENT = "nvidia.com/gpu.present=true"
ROLE_DEFAULTS = REPO / "roles" / "timeslicing" / "defaults" / "main.yml"


@given("a cluster with the GPU Operator", target_fixture="kube")
def kube(clean_cluster: Cluster) -> Cluster:
    return clean_cluster


@pytest.fixture
def session(kube: Cluster) -> Session:
    return Session(kube.kubeconfig)


@pytest.fixture
def pool(runbook_inputs: dict[str, Any]) -> Pool:
    """The shared pool as the runbooks are told it: the role's defaults, overridden like -e."""
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text())
    value = {**defaults, **runbook_inputs}.get
    taint = {"key": value("timeslicing_pool_taint_key"), "value": value("timeslicing_pool_taint_value")}
    return Pool.of({"label_key": value("timeslicing_pool_label_key"), "label_value": value("timeslicing_pool_label_value"),
                    "taint": taint if str(value("timeslicing_pool_taint")).lower() in ("true", "yes", "1") else None})


def node_state(kube: Cluster, name: str) -> dict[str, Any]:
    """Everything about a node that a sharing change could touch: every label but the volatile ones,
    the marks, NVIDIA capacity and allocatable, taints and schedulability."""
    node = Session(kube.kubeconfig).get("Node", name) or {}
    metadata, status, spec = node.get("metadata") or {}, node.get("status") or {}, node.get("spec") or {}
    allocatable = {k: str(v) for k, v in sorted((status.get("allocatable") or {}).items())
                   if k.startswith("nvidia.com/") and str(v) != "0"}
    return {
        "labels": {k: v for k, v in sorted((metadata.get("labels") or {}).items()) if k not in VOLATILE_LABELS},
        "marks": {k: v for k, v in sorted((metadata.get("annotations") or {}).items()) if k.startswith("gpushare.io/")},
        # the capacity of what a plugin serves: the kubelet keeps a resource no plugin serves any more
        # at its capacity with allocatable 0 for 5 minutes (endpointStopGracePeriod), then at 0, never absent
        "capacity": {k: str(v) for k, v in sorted((status.get("capacity") or {}).items()) if k in allocatable},
        "allocatable": allocatable,
        "taints": sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in spec.get("taints") or []),
        "unschedulable": bool(spec.get("unschedulable")),
    }


@dataclass
class Before:
    """What the cluster looked like when a scenario started."""

    nodes: dict[str, dict[str, Any]]
    operand_pods: dict[str, dict[str, str]]  # node -> pod uid -> "daemonset/pod"
    driver_template: str
    clusterpolicy: dict[str, Any]
    configmaps: dict[str, dict[str, str]]  # the operator namespace's, run records aside
    nodes_version: str = ""  # the resourceVersion of the GPU nodes' list read then
    node_versions: dict[str, str] = field(default_factory=dict)  # each GPU node's, in that list


def operand_pods(kube: Cluster) -> dict[str, dict[str, str]]:
    pods: dict[str, dict[str, str]] = {}
    for raw in Session(kube.kubeconfig).list("Pod", kube.operator_namespace):
        pod = OperandPod(raw)
        if pod.daemonset and pod.node and not pod.terminating:
            pods.setdefault(pod.node, {})[pod.uid] = f"{pod.daemonset}/{pod.name}"
    return pods


def driver_template(kube: Cluster) -> str:
    daemonset = Session(kube.kubeconfig).get("DaemonSet", DRIVER, kube.operator_namespace) or {}
    return json.dumps(((daemonset.get("spec") or {}).get("template") or {}), sort_keys=True)


def operator_configmaps(kube: Cluster) -> dict[str, dict[str, str]]:
    """The operator namespace's ConfigMaps (name -> data), the runbooks' run records aside."""
    return {c["metadata"]["name"]: dict(c.get("data") or {}) for c in Session(kube.kubeconfig).list(
        "ConfigMap", kube.operator_namespace) if "gpushare.io/run" not in (c["metadata"].get("labels") or {})}


def clusterpolicy_spec(kube: Cluster) -> dict[str, Any]:
    return (Session(kube.kubeconfig).get("ClusterPolicy", "cluster-policy") or {}).get("spec") or {}


@given("the state of every GPU node is recorded", target_fixture="before")
def record_state(kube: Cluster) -> Before:
    listed = kube.core.list_node(label_selector=GPU_PRESENT)
    return Before({name: node_state(kube, name) for name in kube.gpu_nodes()}, operand_pods(kube),
                  driver_template(kube), clusterpolicy_spec(kube), operator_configmaps(kube),
                  listed.metadata.resource_version, {n.metadata.name: n.metadata.resource_version for n in listed.items})


@given(parsers.parse('the write model allows the pool taint "{key}={value}"'))
def write_model_pool_taint(kube: Cluster, request: pytest.FixtureRequest, key: str, value: str) -> None:
    """An administrator renders the write model (deploy/rbac/55-write-model.yaml) for that pool taint, as
    `gpushare rbac render --pool-taint-key --pool-taint-value` would; the scenario's end puts it back.
    Done once the API server's admission holds it: a dry run of that taint, as the runbook identity."""
    admin = Session(kube.kubeconfig)
    before = (admin.get("ConfigMap", WRITE_MODEL, SERVICE_ACCOUNT_NAMESPACE) or {}).get("data") or {}
    assert "pool-taint-key" in before, f"no write model {SERVICE_ACCOUNT_NAMESPACE}/{WRITE_MODEL} with a pool taint"

    def render(taint_key: str, taint_value: str) -> None:
        admin.patch("ConfigMap", WRITE_MODEL, {"data": {"pool-taint-key": taint_key, "pool-taint-value": taint_value}},
                    SERVICE_ACCOUNT_NAMESPACE)

    render(key, value)
    request.addfinalizer(lambda: render(before["pool-taint-key"], before["pool-taint-value"]))
    node = kube.gpu_nodes()[0]
    taints = (admin.get("Node", node) or {}).get("spec", {}).get("taints") or []
    runbook = Session(kube.runbook_kubeconfig)

    def admitted() -> bool:
        try:
            runbook.patch("Node", node, {"spec": {"taints": [*taints, {"key": key, "value": value, "effect": "NoSchedule"}]}},
                          dry_run=True)
        except ApiError:
            return False
        return True

    wait_for(admitted, 30, f"the admission policies to allow the pool taint {key}={value}", interval_s=0.2)


@given(parsers.parse("the GPU Operator runs release {release}"))
def operator_release(kube: Cluster, release: str) -> None:
    """The ClusterPolicy pins the device plugin and GFD of that GPU Operator release (the chart's
    devicePlugin.version and gfd.version: the operands whose release the runbooks' rules and the
    simulator's behaviours read), as an operator pins an operand; on any cluster, by the test identity.
    The scenario's restore puts the ClusterPolicy back."""
    pin_release(kube, release, settle=True)


@given(parsers.parse("the GPU Operator itself is release {release}"))
def operator_itself(kube: Cluster, release: str) -> None:
    """The ClusterPolicy pins the validator of that release: its image is tagged with the operator's
    own release, whose upgrade controller the runbooks' driver-upgrade rules and the simulator follow
    (v26.7 restarts a driver in place when its config digest is unchanged). The driver's template stays
    as it is (from v26.3 its digest does not hash the validator). The scenario's restore puts it back."""
    chart = cp.RELEASES[release][0]
    kube.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY,
                                            {"spec": {"validator": {"version": chart}}})
    session = Session(kube.kubeconfig)

    def rendered() -> list[str]:
        validator = session.get("DaemonSet", VALIDATOR, kube.operator_namespace) or {}
        images = [c.get("image", "") for c in (((validator.get("spec") or {}).get("template") or {}).get("spec") or {})
                  .get("containers") or []]
        return ([] if images and all(i.endswith(f":{chart}") for i in images) else [f"{VALIDATOR} renders {images}"]) \
            + unsettled(kube)

    wait_for(lambda: not rendered(), RESET_TIMEOUT_S, f"the operator's validator of release {release} ({chart}) to run",
             interval_s=0.5)


@when(parsers.parse("the GPU Operator is upgraded to release {release}"))
def operator_upgraded(kube: Cluster, release: str) -> None:
    """As above, waiting only until the operands run that release (what it does to sharing is the
    scenario's to find)."""
    pin_release(kube, release, settle=False)


def pin_release(kube: Cluster, release: str, settle: bool) -> None:
    spec = cp.default_instance(release)["spec"]
    versions = {key: str(spec[key]["version"]) for key in ("devicePlugin", "gfd")}
    if all(str(cp.section(clusterpolicy_spec(kube), key).get("version") or "") == v for key, v in versions.items()):
        return
    kube.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY, {
        "spec": {key: {"version": version} for key, version in versions.items()}})
    wanted = versions["devicePlugin"]
    session = Session(kube.kubeconfig)

    def runs() -> list[str]:
        """What still runs another release: the operands' templates, their pods, the roll."""
        problems = []
        for name in (DEVICE_PLUGIN, GFD, MPS):
            daemonset = session.get("DaemonSet", name, kube.operator_namespace) or {}
            images = [c.get("image", "") for c in ((daemonset.get("spec") or {}).get("template") or {}).get("spec", {}).get(
                "containers") or []]
            if not images or any(not image.endswith(f":{wanted}") for image in images):
                problems.append(f"DaemonSet {name} renders {images}")
        pods = [OperandPod(p) for p in session.list("Pod", kube.operator_namespace)]
        problems += [f"pod {p.name} runs {c.get('image')}" for p in pods if p.daemonset in (DEVICE_PLUGIN, GFD)
                     for c in p.raw["spec"].get("containers") or [] if not c.get("image", "").endswith(f":{wanted}")]
        return problems + (unsettled(kube) if settle else [])

    wait_for(lambda: not runs(), RESET_TIMEOUT_S, f"the device plugin and GFD of GPU Operator {release} ({wanted}) to run "
             "on every GPU node", interval_s=0.5)


# ---- nodes ------------------------------------------------------------------------------------------
def _allocatable(kube: Cluster, node: str, resource: str) -> int:
    return int((kube.node(node).status.allocatable or {}).get(resource, "0"))


@then(parsers.parse('node "{node}" advertises {count:d} "{resource}"'))
def node_advertises(kube: Cluster, node: str, count: int, resource: str) -> None:
    wait_for(lambda: _allocatable(kube, node, resource) == count, 10,
             f"{node} to advertise {count} {resource} (now {_allocatable(kube, node, resource)})")


@then(parsers.parse('when the run ended, node "{node}" advertised {count:d} "{resource}" with label "{key}" '
                    'set to "{value}"'))
def advertised_as_the_run_ended(kube: Cluster, node: str, count: int, resource: str, key: str, value: str) -> None:
    """Read at once, not waited for: a run whose waits took a passing state for done (the device
    plugin's default config, served for a moment after a restart from v0.18.2) ends before it."""
    now = kube.node(node)
    found = (int((now.status.allocatable or {}).get(resource, "0")), (now.metadata.labels or {}).get(key))
    assert found == (count, value), f"{node} as the run ended: {resource} {found[0]}, {key}={found[1]!r}"


@then(parsers.parse('node "{node}" still has a capacity of {count:d} "{resource}", none of it allocatable'))
def stale_capacity(kube: Cluster, node: str, count: int, resource: str) -> None:
    """The kubelet keeps a resource no plugin serves any more at its capacity, allocatable 0, for its
    endpointStopGracePeriod (5 minutes): what a run right after a rollback finds."""
    status = kube.node(node).status
    found = ((status.capacity or {}).get(resource), (status.allocatable or {}).get(resource))
    assert found == (str(count), "0"), f"{node} {resource}: capacity, allocatable {found}"


@then(parsers.parse('node "{node}" has label "{key}" set to "{value}"'))
def node_has_label(kube: Cluster, node: str, key: str, value: str) -> None:
    wait_for(lambda: (kube.node(node).metadata.labels or {}).get(key) == value, 10,
             f"{node} label {key}={value} (now {(kube.node(node).metadata.labels or {}).get(key)!r})")


@then(parsers.parse('node "{node}" has no label "{key}"'))
def node_lacks_label(kube: Cluster, node: str, key: str) -> None:
    assert key not in (kube.node(node).metadata.labels or {}), f"{node} still carries {key}"


@then(parsers.re(r'node "(?P<node>[^"]+)" (?P<is_in>is in|is not in) the shared pool$'))
def node_in_shared_pool(session: Session, pool: Pool, node: str, is_in: str) -> None:
    current = Node(session.get("Node", node))
    labelled, tainted = current.in_pool(pool), current.pool_taint(pool) == pool.taint
    expected = is_in == "is in"
    assert (labelled, tainted) == (expected, expected), f"{node}: pool label {labelled}, pool taint {tainted}"


@then(parsers.parse('node "{node}" carries no pool taint and no gpushare.io mark'))
def no_taint_no_mark(session: Session, pool: Pool, node: str) -> None:
    current = Node(session.get("Node", node))
    assert current.pool_taint(pool) is None, [str(t) for t in current.taints]
    marks = [k for k in current.annotations if k.startswith("gpushare.io/")]
    assert marks == [], marks


@then(parsers.parse('node "{node}" is schedulable'))
def schedulable(kube: Cluster, node: str) -> None:
    assert not kube.node(node).spec.unschedulable, f"{node} is cordoned"


@then(parsers.parse('node "{node}" is cordoned'))
def cordoned(kube: Cluster, node: str) -> None:
    assert kube.node(node).spec.unschedulable, f"{node} is schedulable"


def _unchanged(kube: Cluster, before: Before, names: list[str]) -> None:
    changed = {}
    for name in names:
        now = node_state(kube, name)
        if now != before.nodes[name]:
            changed[name] = {k: (before.nodes[name][k], now[k]) for k in now if now[k] != before.nodes[name][k]}
    assert not changed, f"changed: {json.dumps(changed, indent=1, sort_keys=True)}"


@then("every GPU node not targeted is exactly as before")
def others_unchanged(kube: Cluster, before: Before, targeted: list[str]) -> None:
    _unchanged(kube, before, [n for n in before.nodes if n not in targeted])


@then("every GPU node is exactly as before")
def all_unchanged(kube: Cluster, before: Before) -> None:
    _unchanged(kube, before, list(before.nodes))


# ---- the GPU Operator's operands ----------------------------------------------------------------------
@then(parsers.re(r"on every GPU node not targeted, no operand pod was restarted(?P<but>, but the device plugin and GFD)?$"))
def untargeted_pods_kept(kube: Cluster, before: Before, targeted: list[str], but: str | None) -> None:
    now = operand_pods(kube)
    allowed = ("nvidia-device-plugin-daemonset/", "gpu-feature-discovery/") if but else ()
    restarted = {}
    for node, pods in before.operand_pods.items():
        if node in targeted:
            continue
        gone = sorted(name for uid, name in pods.items() if uid not in now.get(node, {}) and not name.startswith(allowed))
        if gone:
            restarted[node] = gone
    assert not restarted, f"operand pods restarted outside the target: {restarted}"


def node_states_since(kube: Cluster, before: Before) -> list[dict[str, Any]]:
    """Every state each GPU node went through since `before` was recorded, in order: a watch from
    the list's resourceVersion replays each change, up to the version each node is at now."""
    session = Session(kube.kubeconfig)
    now = {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in session.list("Node", label_selector=GPU_PRESENT)}
    waiting = {name: version for name, version in now.items() if before.node_versions.get(name) != version}
    states: list[dict[str, Any]] = []
    if not waiting:
        return states
    for event in session.watch("Node", before.nodes_version, GPU_PRESENT, timeout_s=30):
        assert event.get("type") != "ERROR", f"the API server's watch history no longer reaches back to the record: {event}"
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        states.append(event["object"])
        meta = event["object"]["metadata"]
        if waiting.get(meta["name"]) == meta["resourceVersion"]:
            del waiting[meta["name"]]
            if not waiting:
                return states
    raise AssertionError(f"the watch did not bring {sorted(waiting)} to their versions of now within 30 s")


@then(parsers.re(r"the driver DaemonSet's template is unchanged and no node (?P<but>but the target )?was cordoned$"))
def driver_untouched(kube: Cluster, before: Before, request: pytest.FixtureRequest, but: str | None) -> None:
    """No GPU node went through a driver upgrade or was cordoned at any moment since the state was
    recorded (read from the watch history, not only now); with "but the target", the run's targets
    were, by the runbook itself (it marks its cordon with gpushare.io/cordoned-by)."""
    assert driver_template(kube) == before.driver_template, "the driver DaemonSet's template changed"
    targets = request.getfixturevalue("targeted") if but else []
    for state in node_states_since(kube, before):
        node = Node(state)
        upgrade = node.labels.get("nvidia.com/gpu-driver-upgrade-state")
        assert upgrade in (None, before.nodes.get(node.name, {}).get("labels", {}).get(
            "nvidia.com/gpu-driver-upgrade-state")), f"{node.name}: driver upgrade {upgrade}"
        if node.unschedulable and not before.nodes.get(node.name, {}).get("unschedulable"):
            assert node.name in targets and node.cordoned_by, (
                f"{node.name} was cordoned (at resourceVersion {node.resource_version}, by "
                f"{node.cordoned_by or 'someone other than the runbooks'})")


@then(parsers.parse('the config-manager of the device plugin and GFD on "{node}" never restarted'))
def config_manager_not_restarted(kube: Cluster, node: str) -> None:
    """The node was labelled only once its pods could see the key: a config-manager that is told of
    a key its mounted ConfigMap lacks exits ("specified config does not exist") and is restarted."""
    readers = (DEVICE_PLUGIN, GFD)
    pods = [p for p in Session(kube.kubeconfig).pods_on([node], kube.operator_namespace)
            if OperandPod(p).daemonset in readers and not OperandPod(p).terminating]
    assert sorted({OperandPod(p).daemonset for p in pods}) == sorted(readers), f"{node}: operand pods {pods}"
    restarts = {f"{p['metadata']['name']}/{c['name']}": c.get("restartCount", 0)
                for p in pods for c in (p.get("status") or {}).get("containerStatuses") or []
                if c["name"] == "config-manager"}
    assert len(restarts) == len(readers), f"{node}: no config-manager container in {sorted(restarts) or 'any pod'}"
    assert not any(restarts.values()), f"{node}: config-manager restarted: {restarts}"


@then("the GFD labels of every GPU node match what it advertises")
def gfd_matches(kube: Cluster) -> None:
    def problems() -> list[str]:
        found = []
        for name in kube.gpu_nodes():
            node = Node(Session(kube.kubeconfig).get("Node", name))
            if node.mig_enabled or node.gpus is None:
                continue
            resource = node.shared_resource if node.shares else "nvidia.com/gpu"
            if node.allocatable(resource) != node.gpus * node.replicas:
                found.append(f"{name}: {resource} {node.allocatable(resource)} != {node.gpus} GPUs x {node.replicas}")
        return found

    wait_for(lambda: not problems(), 30, f"GFD labels to match allocatable ({problems()})")


# ---- the ClusterPolicy and the runbooks' records ----------------------------------------------------------
@then("the ClusterPolicy is as before")
def clusterpolicy_as_before(kube: Cluster, before: Before) -> None:
    assert clusterpolicy_spec(kube) == before.clusterpolicy


def backups(directory: Path) -> list[Path]:
    return sorted(directory.glob("clusterpolicy-*.yaml"))


# ---- the driver upgrade (k8s-operator-libs pkg/upgrade) ----------------------------------------------------
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"


@given(parsers.parse("the driver upgrade gives up evicting GPU pods after {seconds:d} seconds"))
def pod_deletion_timeout(kube: Cluster, seconds: int) -> None:
    """spec.driver.upgradePolicy.podDeletion.timeoutSeconds (the chart's 300; the reset puts it back)."""
    kube.custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy", {
        "spec": {"driver": {"upgradePolicy": {"podDeletion": {"timeoutSeconds": seconds}}}}})


@then("every GPU node finished its driver upgrade and takes pods again")
def driver_upgraded(kube: Cluster) -> None:
    nodes = [kube.node(n) for n in kube.gpu_nodes()]
    assert all((n.metadata.labels or {}).get(UPGRADE_STATE) == "upgrade-done" and not n.spec.unschedulable
               for n in nodes), {n.metadata.name: ((n.metadata.labels or {}).get(UPGRADE_STATE), n.spec.unschedulable)
                                 for n in nodes}


# ---- the MPS control daemon --------------------------------------------------------------------------
def _mps_daemon_pods(kube: Cluster, node: str) -> list[dict[str, Any]]:
    return [p for p in Session(kube.kubeconfig).pods_on([node], kube.operator_namespace)
            if OperandPod(p).daemonset == MPS and not OperandPod(p).terminating]


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


@then(parsers.parse('node "{node}" runs a Ready MPS control daemon'))
def mps_daemon_ready(kube: Cluster, node: str) -> None:
    pods = _mps_daemon_pods(kube, node)
    assert len(pods) == 1 and _ready(pods[0]), f"{node}: MPS control daemon pods {[p['metadata']['name'] for p in pods]}"


@then(parsers.parse('the run record names the MPS control daemon of "{node}" among the readers'))
def mps_daemon_named(kube: Cluster, node: str) -> None:
    """The node label started the daemon after the run's restart, maybe within the ConfigMap write's
    second: only the record tells a re-run that it read the ConfigMap as the run left it."""
    records = Session(kube.kubeconfig).list("ConfigMap", kube.records_namespace, label_selector="gpushare.io/run")
    named = {uid for r in records for uid in json.loads((r.get("data") or {}).get("readers.json", '{"pods": []}'))["pods"]}
    daemons = [p["metadata"]["uid"] for p in _mps_daemon_pods(kube, node)]
    assert daemons and set(daemons) <= named, f"{node}: MPS control daemon {daemons}, the records name {sorted(named)}"


@dataclass(frozen=True)
class MpsFault:
    """The MPS control daemon pod seen never serving, and its sidecar's restarts then."""

    pod: str
    uid: str
    restarts: int


def _sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((c for c in statuses if c.get("name") == "config-manager"), {})


def _crash_looping(pod: dict[str, Any]) -> bool:
    return ((_sidecar(pod).get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"


@then(parsers.parse('the MPS control daemon on "{node}" never serves: its config-manager sidecar crash-loops and the '
                    'node advertises 0 "{resource}"'), target_fixture="mps_fault")
def mps_never_serves(kube: Cluster, node: str, resource: str) -> MpsFault:
    session = Session(kube.kubeconfig)

    def seen() -> MpsFault | None:
        """Once settled: GFD's new pod Ready on the node's key (its restart serves the default for a
        moment, unlabels mps.capable and so replaces the daemon's pod), the daemon pod made after it."""
        pods = _mps_daemon_pods(kube, node)
        gfd = [OperandPod(p) for p in session.pods_on([node], kube.operator_namespace)
               if OperandPod(p).daemonset == GFD and not OperandPod(p).terminating]
        if len(pods) != 1 or len(gfd) != 1 or not gfd[0].ready or not _crash_looping(pods[0]):
            return None
        daemon = OperandPod(pods[0])
        if (kube.node(node).metadata.labels or {}).get("nvidia.com/mps.capable") != "true" or \
                _allocatable(kube, node, resource) != 0 or not (daemon.created and gfd[0].created and
                                                                daemon.created >= gfd[0].created):
            return None
        return MpsFault(daemon.name, daemon.uid, int(_sidecar(pods[0]).get("restartCount") or 0))

    return wait_for(seen, 60, f"{node}'s MPS control daemon to crash-loop its sidecar and the node to serve no {resource}")


@then(parsers.parse('the MPS control daemon on "{node}" was crash-looping when the run read it, and still was when '
                    'the run ended, the node serving 0 "{resource}"'))
def mps_fault_overlapped(kube: Cluster, node: str, resource: str, mps_fault: MpsFault, runbook_run: Any) -> None:
    """The fault was in effect from before the run (mps_fault), when it read the daemon (the pod its
    refusal names, failing since the fault was seen) and at its end (read at once). The pod may differ
    from the one first seen: GFD's restart in the operator's roll relabels mps.capable for a moment,
    and the DaemonSet replaces the daemon's pod, which fails the same way."""
    said = " ".join(" ".join(runbook_run.run.failure_messages()).split())
    named = re.search(rf"{re.escape(node)}: the MPS control daemon never serves: its config-manager sidecar has failed "
                      r"(\d+) time\(s\) since pod (\S+) started", said)
    assert named, f"the run named no failing MPS daemon pod on {node}: {said[-2000:]}"
    assert int(named[1]) >= (mps_fault.restarts if named[2] == mps_fault.pod else 1), named[0]
    pods = _mps_daemon_pods(kube, node)
    assert len(pods) == 1 and _crash_looping(pods[0]), f"{node}: MPS daemon pods now {[p['metadata']['name'] for p in pods]}"
    assert _allocatable(kube, node, resource) == 0, f"{node} serves {resource} again"


@then(parsers.parse('node "{node}" runs no MPS control daemon'))
def mps_daemon_gone(kube: Cluster, node: str) -> None:
    wait_for(lambda: not _mps_daemon_pods(kube, node), 60, f"the MPS control daemon to leave {node}")


@given(parsers.parse('the ClusterPolicy\'s operand update strategy is "{strategy}"'))
def operand_update_strategy(kube: Cluster, strategy: str) -> None:
    """spec.daemonsets.updateStrategy: the operator re-renders the operand DaemonSets with it (no pod restarts)."""
    kube.custom.patch_cluster_custom_object(cp.GROUP, cp.VERSION, cp.PLURAL, cp.CLUSTER_POLICY,
                                            {"spec": {"daemonsets": {"updateStrategy": strategy}}})
    session = Session(kube.kubeconfig)

    def applied() -> bool:
        readers = [d for d in session.list("DaemonSet", kube.operator_namespace)
                   if d["metadata"]["name"] in (DEVICE_PLUGIN, GFD)]
        return len(readers) == 2 and all(
            (d["spec"].get("updateStrategy") or {}).get("type") == strategy
            and (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"] for d in readers)

    wait_for(applied, 60, f"the device plugin and GFD DaemonSets re-rendered with updateStrategy {strategy}")
