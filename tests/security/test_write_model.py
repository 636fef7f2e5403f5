"""The write model (deploy/rbac/60-admission-policies.yaml) on the real API server, attacked as the
runbook identity: every field the runbooks do not own, and every owned field given a value they
never write, in every form a write can take, is refused at admission; the writes the runbooks make
still pass. Dry runs: admission judges them as real writes, and nothing is changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from gpushare.dra.plan import device_class
from gpushare.dra.settings import PilotSettings, Settings
from gpushare.k8s.connection import from_configuration
from gpushare.k8s.kinds import kind_of
from gpushare.k8s.session import ApiError, Session
from gpushare.polling import wait_for
from gpushare.rbac import WRITE_MODEL, WRITTEN_FOR_POOL_LABEL_KEY, WRITTEN_FOR_POOL_TAINT_KEY, WRITTEN_FOR_POOL_TAINT_VALUE
from tests.security.attacks import (
    CUSTOM_FORMS,
    FORMS,
    NODE_COVERED,
    SERVER_OWNED_METADATA,
    Mutation,
    clusterpolicy_attacks,
    deviceclass_attacks,
    dra_node_attacks,
    lease_attacks,
    node_attacks,
    pool_taint_attacks,
    record_attacks,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
APPLY = "application/apply-patch+yaml"
LOCK = "gpushare-runbook-lock"


@pytest.fixture(scope="module")
def runbook(runbook_api: client.ApiClient) -> Session:
    return Session(connection=from_configuration(runbook_api.configuration), retries=False)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Session:
    return Session(cluster.kubeconfig)


@pytest.fixture(scope="module")
def model(admin: Session, cluster: Cluster) -> dict[str, str]:
    found = admin.get("ConfigMap", WRITE_MODEL, cluster.records_namespace)
    assert found, f"no write model {cluster.records_namespace}/{WRITE_MODEL}: apply deploy/rbac"
    return found["data"]


def _write(session: Session, form: str, obj: dict[str, Any], mutation: Mutation) -> dict[str, Any]:
    """Send `mutation` of `obj` in `form` as a dry run; the answer's object."""
    metadata = obj["metadata"]
    path = _path(obj)
    body = mutation.body(form, obj)
    if form == "update":
        return session.request("PUT", path, body=body, query={"dryRun": "All"})
    if form == "apply":
        return session.request("PATCH", path, body=json.dumps(body), content_type=APPLY,
                               query={"dryRun": "All", "fieldManager": "gpushare-attack", "force": "true"})
    assert metadata["name"]
    return session.patch(obj["kind"], metadata["name"], body, metadata.get("namespace"), patch_type=form, dry_run=True)


def _path(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    return kind_of(obj["kind"], obj["apiVersion"]).path(metadata.get("namespace"), metadata["name"])


def assert_refused(session: Session, admin: Session, form: str, obj: dict[str, Any], mutation: Mutation) -> None:
    """The same write sent by the administrator first, so that no attack passes by changing nothing:
    where the administrator's write holds the mutation, the runbook identity's is refused at admission
    (403 naming a gpushare policy, or RBAC's); where the API server itself refuses it (422) or
    ignores the field, the runbook identity's write must not hold it either."""
    try:
        control = mutation.took(obj, _write(admin, form, obj, mutation))
    except ApiError as err:
        assert err.status == 422, f"the administrator's {mutation.name} ({form}): {err.status} {err}"
        control = False
    try:
        answer = _write(session, form, obj, mutation)
    except ApiError as err:
        assert err.status in ((403,) if control else (403, 422)), f"{mutation.name} ({form}): {err.status} {err}"
        if err.status == 403:
            assert "ValidatingAdmissionPolicy 'gpushare-runbook-" in str(err) or "is forbidden" in str(err), str(err)
        return
    assert not mutation.took(obj, answer), f"the runbook identity wrote {mutation.name} ({mutation.why}) as a {form}"
    assert not control, f"{mutation.name} ({form}): the administrator's write held, the runbook identity's was not refused"


def _gpu_node(admin: Session) -> dict[str, Any]:
    nodes = [n for n in admin.list("Node") if "nvidia.com/gpu.present" in (n["metadata"].get("labels") or {})]
    assert nodes, "no GPU node"
    return sorted(nodes, key=lambda n: n["metadata"]["name"])[0]


NODE_ATTACKS = node_attacks("gpu-mode")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", NODE_ATTACKS, ids=lambda m: f"{m.name}:{m.why}")
def test_node_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session, model: dict[str, str],
                                                         mutation: Mutation, form: str) -> None:
    if model["pool-label-key"] != "gpu-mode" and model["pool-label-key"] in json.dumps(mutation.value):
        pytest.skip("written for the default pool label key")
    assert_refused(runbook, admin, form, _gpu_node(admin), mutation)


POOL_TAINT_ATTACKS = pool_taint_attacks(WRITTEN_FOR_POOL_TAINT_KEY, WRITTEN_FOR_POOL_TAINT_VALUE, WRITTEN_FOR_POOL_LABEL_KEY)
ADMIN_TAINT = {"key": "example.com/maintenance", "effect": "NoSchedule"}
RENDERED_FOR = {"pool-taint-key": WRITTEN_FOR_POOL_TAINT_KEY, "pool-taint-value": WRITTEN_FOR_POOL_TAINT_VALUE,
                "pool-label-key": WRITTEN_FOR_POOL_LABEL_KEY}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", POOL_TAINT_ATTACKS, ids=lambda m: f"{m.name}:{m.why}")
def test_taints_under_the_pool_taint_key_other_than_the_write_models_are_refused(
        runbook: Session, admin: Session, model: dict[str, str], mutation: Mutation, form: str) -> None:
    if any(model.get(key, value) != value for key, value in RENDERED_FOR.items()):
        pytest.skip("written for the pool taint and label deploy/rbac is written for")
    assert_refused(runbook, admin, form, _gpu_node(admin), mutation)


def _pool_taint(model: dict[str, str]) -> dict[str, str]:
    return {"key": model["pool-taint-key"], "value": model["pool-taint-value"], "effect": "NoSchedule"}


@pytest.fixture
def tainted(admin: Session) -> Iterator[Any]:
    """A GPU node the administrator gives extra taints (the test's, beside one of its own so that no removal
    empties the list), put back as it was afterwards."""
    node = _gpu_node(admin)
    name, before = node["metadata"]["name"], node["spec"].get("taints") or []

    def taint(*extra: dict[str, str]) -> dict[str, Any]:
        return admin.patch("Node", name, {"spec": {"taints": [*before, ADMIN_TAINT, *extra]}})

    yield taint
    admin.patch("Node", name, {"spec": {"taints": before or None}})


def test_the_node_writes_the_timeslicing_runbooks_make_pass(runbook: Session, admin: Session, model: dict[str, str],
                                                           tainted: Any) -> None:
    """Its config and pool labels, its mark, the cordon, the pool taint as the write model holds it added
    and removed: in the forms the runbooks send (merge, JSON patch)."""
    node = _gpu_node(admin)
    allowed = [
        Mutation(("metadata", "labels"), {"nvidia.com/device-plugin.config": "shared", model["pool-label-key"]: "shared"},
                 "the config and pool labels"),
        Mutation(("metadata", "annotations"), {"gpushare.io/timeslicing": "{}"}, "the mark"),
        Mutation(("spec", "unschedulable"), True, "the cordon"),
        Mutation(("spec", "taints"), [_pool_taint(model)], "the pool taint", append=True),
    ]
    for mutation in allowed:
        for form in ("merge", "json"):
            assert mutation.took(node, _write(runbook, form, node, mutation)), f"{mutation.name} ({form}) refused"
    with_pool = tainted(_pool_taint(model))
    removal = Mutation(("spec", "taints"), [t for t in with_pool["spec"]["taints"] if t != _pool_taint(model)],
                       "the pool taint removed")
    for form in ("merge", "json"):
        assert removal.took(with_pool, _write(runbook, form, with_pool, removal)), f"the pool taint's removal ({form}) refused"


def test_a_taint_under_the_pool_taint_key_the_runbooks_never_wrote_is_not_removed(runbook: Session, admin: Session,
                                                                                  model: dict[str, str],
                                                                                  tainted: Any) -> None:
    """An administrator's own nvidia.com/gpu taint (another value) is not the runbooks' to remove."""
    own = {"key": model["pool-taint-key"], "value": model["pool-taint-value"] + "-admin", "effect": "NoSchedule"}
    node = tainted(own)
    removal = Mutation(("spec", "taints"), [t for t in node["spec"]["taints"] if t != own],
                       "an administrator's taint removed")
    for form in FORMS:
        assert_refused(runbook, admin, form, node, removal)


@contextmanager
def _rendered(admin: Session, runbook: Session, model: dict[str, str], **data: str) -> Iterator[dict[str, str]]:
    """The write model with `data` over it (as `gpushare rbac render` would write it), in force: a dry run of
    its pool taint as the runbook identity passes; put back afterwards."""
    node = _gpu_node(admin)
    rendered = {**model, **data}
    admin.patch("ConfigMap", WRITE_MODEL, {"data": data}, "gpushare-system")
    taint = Mutation(("spec", "taints"), [_pool_taint(rendered)], "the rendered pool taint", append=True)

    def in_force() -> bool:
        try:
            return taint.took(node, _write(runbook, "merge", node, taint))
        except ApiError:
            return False

    try:
        wait_for(in_force, 30, "the admission policies to read the rendered write model", interval_s=0.2)
        yield rendered
    finally:
        admin.patch("ConfigMap", WRITE_MODEL, {"data": {key: model[key] for key in data}}, "gpushare-system")


@pytest.fixture
def dedicated_model(admin: Session, runbook: Session, model: dict[str, str]) -> Iterator[dict[str, str]]:
    """The write model rendered for the pool taint value `dedicated` (`--pool-taint-value dedicated`)."""
    with _rendered(admin, runbook, model, **{"pool-taint-value": "dedicated"}) as rendered:
        yield rendered


def test_the_pool_taint_is_the_one_the_write_model_is_rendered_for(runbook: Session, admin: Session,
                                                                   dedicated_model: dict[str, str]) -> None:
    """Rendered for nvidia.com/gpu=dedicated, the written-for shared value is refused like any other, and the
    DRA pilot's taint still passes."""
    node = _gpu_node(admin)
    shared = {"key": dedicated_model["pool-taint-key"], "value": WRITTEN_FOR_POOL_TAINT_VALUE, "effect": "NoSchedule"}
    for form in FORMS:
        assert_refused(runbook, admin, form, node, Mutation(("spec", "taints"), [shared], "the value not rendered",
                                                            append=True))
    pilot = Mutation(("spec", "taints"), [{"key": "nvidia.com/gpu", "value": "dra-pilot", "effect": "NoSchedule"}],
                     "the pilot taint", append=True)
    assert pilot.took(node, _write(runbook, "merge", node, pilot))


def test_every_node_field_the_api_server_lets_a_client_write_is_attacked(admin: Session) -> None:
    """The attacks cover every ObjectMeta and NodeSpec field of this API server's schema: a field a
    newer Kubernetes adds fails here until the write model and the attacks say what it is."""
    schemas = admin.request("GET", "/openapi/v3/api/v1")["components"]["schemas"]
    fields = set(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]) - SERVER_OWNED_METADATA
    fields |= set(schemas["io.k8s.api.core.v1.NodeSpec"]["properties"])
    attacked = {m.path[-1] for m in NODE_ATTACKS} | {"unschedulable"}  # a bool: both values are the runbooks'
    assert fields <= NODE_COVERED | {"unschedulable"}, f"fields the write model does not name: {fields - NODE_COVERED}"
    assert (fields - {"configSource"}) <= attacked, f"fields no attack writes: {fields - attacked}"


def test_a_node_without_gpus_is_refused_whatever_is_written(runbook: Session, admin: Session) -> None:
    cpu = [n for n in admin.list("Node") if "nvidia.com/gpu.present" not in (n["metadata"].get("labels") or {})]
    if not cpu:
        pytest.skip("this cluster has no node without GPUs")
    for form in FORMS:
        assert_refused(runbook, admin, form, cpu[0], Mutation(("metadata", "labels"), {"gpu-mode": "shared"}, "pool label"))


def _clusterpolicy(admin: Session) -> dict[str, Any]:
    policy = admin.get("ClusterPolicy", "cluster-policy")
    assert policy, "no ClusterPolicy cluster-policy"
    return policy


def test_clusterpolicy_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session) -> None:
    """Every section of the live ClusterPolicy's spec (not a list written here: what the operator
    installed), in every form."""
    policy = _clusterpolicy(admin)
    attacks = clusterpolicy_attacks(policy)
    assert len(attacks) > 20
    for mutation in attacks:
        for form in CUSTOM_FORMS:
            assert_refused(runbook, admin, form, policy, mutation)


def test_the_clusterpolicy_writes_the_runbooks_make_pass(runbook: Session, admin: Session, model: dict[str, str]) -> None:
    """Rendered for the pool taint key gpu-mode: the chart's operands already tolerate nvidia.com/gpu."""
    policy = _clusterpolicy(admin)
    with _rendered(admin, runbook, model, **{"pool-taint-key": "gpu-mode"}) as rendered:
        allowed = [
            Mutation(("spec", "devicePlugin", "config"), {"name": rendered["timeslicing-configmap"], "default": "any"},
                     "enable"),
            Mutation(("spec", "daemonsets", "tolerations"), [{"key": rendered["pool-taint-key"], "operator": "Exists",
                                                              "effect": "NoSchedule"}], "the pool toleration", append=True),
        ]
        for mutation in allowed:
            for form in ("merge", "json"):
                assert mutation.took(policy, _write(runbook, form, policy, mutation)), f"{mutation.name} ({form}) refused"


def test_a_toleration_of_a_key_other_than_the_pool_taints_is_refused(runbook: Session, admin: Session,
                                                                    model: dict[str, str]) -> None:
    """The pool label's key tolerated, where the pool taint has another key: no run writes it."""
    if model.get("pool-taint-key", WRITTEN_FOR_POOL_TAINT_KEY) == model["pool-label-key"]:
        pytest.skip("the pool taint is keyed by the pool label here")
    toleration = Mutation(("spec", "daemonsets", "tolerations"), [{"key": model["pool-label-key"], "operator": "Exists",
                                                                   "effect": "NoSchedule"}], "not the pool taint's", append=True)
    for form in CUSTOM_FORMS:
        assert_refused(runbook, admin, form, _clusterpolicy(admin), toleration)


@pytest.fixture
def record(admin: Session, cluster: Cluster) -> Iterator[dict[str, Any]]:
    """A run record as the runbooks write it (created by the admin: the attack edits an existing one)."""
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gpushare-run-enable-attack", "namespace": cluster.records_namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpushare", "gpushare.io/run": "enable-timeslicing"}},
            "data": {"intent.json": "{}"}}
    yield admin.create(body)
    admin.delete("ConfigMap", body["metadata"]["name"], cluster.records_namespace)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", record_attacks(), ids=lambda m: f"{m.name}:{m.why}")
def test_run_record_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session, record: dict[str, Any],
                                                               mutation: Mutation, form: str) -> None:
    assert_refused(runbook, admin, form, record, mutation)


def test_a_run_records_data_is_the_runbooks_to_write(runbook: Session, record: dict[str, Any]) -> None:
    mutation = Mutation(("data", "intent.json"), '{"runbook": "enable-timeslicing"}', "the record's intent")
    assert mutation.took(record, _write(runbook, "merge", record, mutation))


def _configmap(name: str, namespace: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"config.yaml": "version: v1\n"},
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpushare"}, **metadata}}


def test_configmaps_are_created_only_by_their_rendered_names(runbook: Session, cluster: Cluster,
                                                             model: dict[str, str]) -> None:
    operator, records = model["operator-namespace"], cluster.records_namespace
    refused = {
        "a device-plugin config of the attacker's (allocatable 8 -> 512)": _configmap("evil-config", operator),
        "the write model itself": _configmap(WRITE_MODEL, records),
        "a ConfigMap of another name in the runbooks' namespace": _configmap("evil", records),
        "a record without the runbooks' label": {**_configmap("gpushare-run-x", records),
                                                 "metadata": {"name": "gpushare-run-x", "namespace": records}},
        "a record owned by a ghost (deleted by the garbage collector)": _configmap(
            "gpushare-run-y", records, ownerReferences=[{"apiVersion": "v1", "kind": "Namespace", "name": "gone",
                                                          "uid": "00000000-0000-0000-0000-00000000dead"}]),
        "a record that can never be deleted": _configmap("gpushare-run-z", records, finalizers=["evil.example.com/x"]),
    }
    for why, body in refused.items():
        with pytest.raises(ApiError) as err:
            runbook.create(body, dry_run=True)
        assert err.value.status == 403, f"{why}: {err.value}"
        assert "ValidatingAdmissionPolicy 'gpushare-runbook-configmaps'" in str(err.value), f"{why}: {err.value}"
    runbook.create(_configmap(model["timeslicing-configmap"], operator), dry_run=True)
    runbook.create(_configmap("gpushare-run-enable-x", records), dry_run=True)


def test_the_write_model_cannot_be_changed_by_the_runbook_identity(runbook: Session, admin: Session,
                                                                    cluster: Cluster) -> None:
    model = admin.get("ConfigMap", WRITE_MODEL, cluster.records_namespace)
    assert model
    for form in FORMS:
        assert_refused(runbook, admin, form, model, Mutation(("data", "timeslicing-configmap"), "evil-config", "loosen it"))
    with pytest.raises(ApiError) as err:
        runbook.delete("ConfigMap", WRITE_MODEL, cluster.records_namespace, dry_run=True)
    assert err.value.status == 403


@pytest.fixture
def lock(admin: Session, cluster: Cluster) -> Iterator[dict[str, Any]]:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LOCK, "namespace": cluster.records_namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"holderIdentity": "attack@test", "leaseDurationSeconds": 60}}
    existing = admin.get("Lease", LOCK, cluster.records_namespace)
    if existing:
        pytest.skip(f"a run holds the lock: {existing['spec'].get('holderIdentity')}")
    yield admin.create(body)
    admin.delete("Lease", LOCK, cluster.records_namespace)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", lease_attacks(), ids=lambda m: f"{m.name}:{m.why}")
def test_lock_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session, lock: dict[str, Any],
                                                          mutation: Mutation, form: str) -> None:
    assert_refused(runbook, admin, form, lock, mutation)


def test_leases_other_than_the_lock_are_refused(runbook: Session, cluster: Cluster) -> None:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "evil-lock", "namespace": cluster.records_namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
            "spec": {"holderIdentity": "attack@test", "leaseDurationSeconds": 60}}
    with pytest.raises(ApiError) as err:
        runbook.create(body, dry_run=True)
    assert err.value.status == 403 and "gpushare-runbook-leases" in str(err.value), str(err.value)


def _pods(admin: Session, namespace: str) -> list[dict[str, Any]]:
    return [p for p in admin.list("Pod", namespace) if not p["metadata"].get("deletionTimestamp")]


def test_pods_outside_the_runbooks_reach_cannot_be_evicted_or_deleted(runbook: Session, admin: Session,
                                                                       model: dict[str, str]) -> None:
    operator = model["operator-namespace"]
    readers = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-device-plugin-mps-control-daemon")

    def reads_config(pod: dict[str, Any]) -> bool:
        return any(o.get("kind") == "DaemonSet" and o.get("name") in readers
                   for o in pod["metadata"].get("ownerReferences") or [])

    others = [p for p in _pods(admin, operator) if not reads_config(p)]
    assert others, f"no operand pod in {operator} besides the config readers"
    with pytest.raises(ApiError) as err:
        runbook.delete("Pod", others[0]["metadata"]["name"], operator, dry_run=True)
    assert err.value.status == 403 and "gpushare-runbook-pods" in str(err.value), str(err.value)
    victims = [p for ns in ("kube-system", operator) for p in _pods(admin, ns)]
    assert victims
    for pod in victims[:3]:
        with pytest.raises(ApiError) as err:
            runbook.evict(pod["metadata"]["name"], pod["metadata"]["namespace"], dry_run=True)
        assert err.value.status == 403 and "gpushare-runbook-pods" in str(err.value), str(err.value)
    reader = next(p for p in _pods(admin, operator) if reads_config(p))
    runbook.delete("Pod", reader["metadata"]["name"], operator, dry_run=True)


@pytest.fixture
def pilot_class(admin: Session) -> Iterator[dict[str, Any]]:
    """The DRA pilot's DeviceClass as enable-dra-pilot.yml writes it (created by the admin: the attack edits it)."""
    body = device_class(PilotSettings(readiness=Settings()))
    if admin.get("DeviceClass", body["metadata"]["name"]):
        pytest.skip("a DRA pilot runs on this cluster: its DeviceClass exists")
    yield admin.create(body)
    admin.delete("DeviceClass", body["metadata"]["name"])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", deviceclass_attacks(), ids=lambda m: f"{m.name}:{m.why}")
def test_pilot_deviceclass_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session,
                                                                      pilot_class: dict[str, Any], mutation: Mutation,
                                                                      form: str) -> None:
    assert_refused(runbook, admin, form, pilot_class, mutation)


def test_deviceclasses_are_created_only_as_the_dra_pilot_writes_its_own(runbook: Session) -> None:
    """A create is judged whole: the pilot's class by its name, as written, or the readiness's dry-run probe."""
    pilot = device_class(PilotSettings(readiness=Settings()))
    probe = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"generateName": "gpushare-readiness-", "labels": {"app.kubernetes.io/managed-by": "gpushare"}},
             "spec": {"extendedResourceName": "nvidia.com/gpu",
                      "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
    whole = Mutation(("metadata", "name"), "evil.example.com", "another name")
    refused = [
        (whole, whole.merged(pilot)),
        (Mutation(("metadata", "generateName"), "gpu-pilot-", "a generated name"),
         {**pilot, "metadata": {**pilot["metadata"], "name": None, "generateName": "gpu-pilot-"}}),
        (Mutation(("metadata", "generateName"), "gpushare-readiness-", "the readiness probe, stored"), probe),
        *((m, m.merged(pilot)) for m in deviceclass_attacks()),
    ]
    for mutation, body in refused:
        try:
            answer = runbook.create(body, dry_run=mutation.why != "the readiness probe, stored")
        except ApiError as err:
            assert err.status in (403, 422), f"{mutation.why}: {err}"
            if err.status == 403:
                assert "ValidatingAdmissionPolicy 'gpushare-runbook-deviceclasses'" in str(err), f"{mutation.why}: {err}"
            continue
        # allowed only where the API server dropped the field before admission (extendedResourceName while the
        # DRAExtendedResource gate is off), so that what it stores is the pilot's class
        assert mutation.path == ("spec", "extendedResourceName") and "extendedResourceName" not in answer["spec"], (
            f"the runbook identity created a DeviceClass with {mutation.why}")
    runbook.create(probe, dry_run=True)
    for sharing in ("timeslicing", "mps"):
        runbook.create(device_class(PilotSettings(readiness=Settings(sharing=sharing))), dry_run=True)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mutation", dra_node_attacks(), ids=lambda m: f"{m.name}:{m.why}")
def test_dra_pilot_node_writes_outside_the_write_model_are_refused(runbook: Session, admin: Session, mutation: Mutation,
                                                                   form: str) -> None:
    assert_refused(runbook, admin, form, _gpu_node(admin), mutation)


def test_the_node_writes_the_dra_pilot_makes_pass(runbook: Session, admin: Session) -> None:
    """Its two labels with their values, its mark, the cordon and the pilot taint (NoSchedule)."""
    node = _gpu_node(admin)
    allowed = [
        Mutation(("metadata", "labels"), {"nvidia.com/gpu.deploy.device-plugin": "false",
                                          "nvidia.com/dra-kubelet-plugin": "true"}, "the switch"),
        Mutation(("metadata", "annotations"), {"gpushare.io/dra-pilot": "{}", "gpushare.io/cordoned-by": "x"}, "marks"),
        Mutation(("spec", "unschedulable"), True, "the cordon"),
        Mutation(("spec", "taints"), [{"key": "nvidia.com/gpu", "value": "dra-pilot", "effect": "NoSchedule"}],
                 "the pilot taint", append=True),
    ]
    for mutation in allowed:
        assert mutation.took(node, _write(runbook, "merge", node, mutation)), f"{mutation.name} refused"
