"""deploy/rbac/61-admission-kueue.yaml on the real API server: the runbook identity, which RBAC lets
create and patch every Kueue object and create any Namespace, may write only what the queue-backfill
runbook writes: its own labelled Kueue objects, LocalQueues and Namespaces in the team namespaces
`gpushare sim up` renders for (gpushare_testbed.kueue.TEAM_NAMESPACES), no held queue, no flavor
tolerating every taint. Every attempt is a dry run; the features run the runbook itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpushare_testbed.kueue import TEAM_NAMESPACES
from gpushare.kueue.kinds import GROUP, VERSION
from gpushare.polling import wait_for
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster
OURS = {"app.kubernetes.io/managed-by": "gpushare"}
KUEUE_POLICY = "ValidatingAdmissionPolicy 'gpushare-runbook-kueue' with binding 'gpushare-runbook-kueue' denied request"
NAMESPACE_POLICY = ("ValidatingAdmissionPolicy 'gpushare-runbook-namespaces' with binding 'gpushare-runbook-namespaces' "
                    "denied request")
FOREIGN = "gpushare-test-other-team"  # another team's objects: not created by the runbooks
OWN = "gpushare-test-own"  # labelled as the runbook labels what it creates


def _flavor(name: str, labels: dict[str, str] | None) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"nodeLabels": {"nvidia.com/gpu.present": "true"}}}


def _cluster_queue(name: str, labels: dict[str, str] | None, flavor: str, quota: str = "4") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}}


def _priority_class(name: str, labels: dict[str, str] | None) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "WorkloadPriorityClass",
            "metadata": {"name": name, **({"labels": labels} if labels else {})}, "value": 100}


def _local_queue(namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
            "metadata": {"name": "gpu", "namespace": namespace, "labels": OURS}, "spec": {"clusterQueue": OWN}}


OBJECTS = {"resourceflavors": [_flavor(FOREIGN, None), _flavor(OWN, OURS)],
           "clusterqueues": [_cluster_queue(FOREIGN, None, FOREIGN), _cluster_queue(OWN, OURS, OWN)],
           "workloadpriorityclasses": [_priority_class(FOREIGN, None), _priority_class(OWN, OURS)]}


def _refused(api: client.ApiClient) -> bool:
    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            GROUP, VERSION, "workloadpriorityclasses", _priority_class("gpushare-test-unlabelled", None), dry_run="All")
    except ApiException as err:
        return err.status == 403
    return False


@pytest.fixture(scope="module")
def kueue_objects(cluster: Cluster, runbook_api: client.ApiClient) -> Iterator[None]:
    """Another team's flavor, ClusterQueue and priority class, and one of each labelled as the runbook's,
    created by the administrator and deleted afterwards. The API server enforces a policy up to a
    second after it was created (its policy source refreshes once a second): on a cluster just
    started, wait for that."""
    try:
        cluster.custom.list_cluster_custom_object(GROUP, VERSION, "clusterqueues")
    except ApiException as err:
        if err.status == 404:
            pytest.skip("this cluster does not serve Kueue")
        raise
    wait_for(lambda: _refused(runbook_api), 10, "the admission policy gpushare-runbook-kueue to be in force")
    for plural, objects in OBJECTS.items():
        for obj in objects:
            cluster.custom.create_cluster_custom_object(GROUP, VERSION, plural, obj)
    yield
    for plural, objects in reversed(OBJECTS.items()):
        for obj in objects:
            cluster.custom.delete_cluster_custom_object(GROUP, VERSION, plural, obj["metadata"]["name"])


def _refusal(attempt: Callable[[], Any]) -> str:
    with pytest.raises(ApiException) as refused:
        attempt()
    assert refused.value.status == 403, refused.value.body
    return json.loads(refused.value.body)["message"]


def _patch(api: client.ApiClient, plural: str, name: str, body: dict[str, Any]) -> Callable[[], Any]:
    return lambda: client.CustomObjectsApi(api).patch_cluster_custom_object(GROUP, VERSION, plural, name, body,
                                                                            dry_run="All")


@pytest.mark.parametrize(("what", "plural", "patch"), [
    ("hold and drain another team's ClusterQueue with quota 0", "clusterqueues",
     {"spec": {"stopPolicy": "HoldAndDrain", "resourceGroups": _cluster_queue(FOREIGN, None, FOREIGN, "0")["spec"]
               ["resourceGroups"]}}),
    ("give another team's flavor a toleration of every taint", "resourceflavors",
     {"spec": {"tolerations": [{"operator": "Exists"}]}}),
    ("change another team's priority class", "workloadpriorityclasses", {"value": 1000000}),
    ("adopt another team's ClusterQueue by labelling it", "clusterqueues", {"metadata": {"labels": OURS}}),
])
def test_kueue_objects_the_runbooks_did_not_create_cannot_be_changed(
        runbook_api: client.ApiClient, kueue_objects: None, what: str, plural: str, patch: dict[str, Any]) -> None:
    message = _refusal(_patch(runbook_api, plural, FOREIGN, patch))
    assert KUEUE_POLICY in message, what
    assert ("may change only the Kueue objects the runbooks created (metadata.labels "
            "app.kubernetes.io/managed-by=gpushare), not ") in message and message.endswith(f" {FOREIGN}"), message


@pytest.mark.parametrize(("what", "plural", "patch", "refusal"), [
    ("hold and drain its own ClusterQueue", "clusterqueues", {"spec": {"stopPolicy": "HoldAndDrain"}},
     f"may not set spec.stopPolicy HoldAndDrain of ClusterQueue {OWN}"),
    ("give its own flavor a toleration of every taint", "resourceflavors",
     {"spec": {"tolerations": [{"key": "", "operator": "Exists", "effect": "NoSchedule"}]}},
     f"may not give ResourceFlavor {OWN} a toleration of every taint"),
    ("remove its label", "workloadpriorityclasses", {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
     f"the label may not be left out, changed or removed), not WorkloadPriorityClass {OWN}"),
    ("change its label", "clusterqueues", {"metadata": {"labels": {"app.kubernetes.io/managed-by": "someone"}}},
     f"not ClusterQueue {OWN}"),
])
def test_the_runbooks_own_kueue_objects_keep_their_label_no_stop_policy_and_no_toleration_of_everything(
        runbook_api: client.ApiClient, kueue_objects: None, what: str, plural: str, patch: dict[str, Any],
        refusal: str) -> None:
    message = _refusal(_patch(runbook_api, plural, OWN, patch))
    assert KUEUE_POLICY in message and refusal in message, (what, message)


def test_kueue_objects_are_created_only_labelled_and_local_queues_only_in_team_namespaces(
        runbook_api: client.ApiClient, kueue_objects: None) -> None:
    custom = client.CustomObjectsApi(runbook_api)
    unlabelled = _cluster_queue("gpushare-test-unlabelled", None, OWN)
    message = _refusal(lambda: custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", unlabelled,
                                                                   dry_run="All"))
    assert KUEUE_POLICY in message and "may write Kueue objects only labelled app.kubernetes.io/managed-by=gpushare" \
        in message, message
    for namespace in ("kube-system", "default"):
        message = _refusal(lambda namespace=namespace: custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "localqueues", _local_queue(namespace), dry_run="All"))
        assert KUEUE_POLICY in message, message
        assert (f"may write LocalQueues only in the team namespaces an administrator listed (gpushare rbac render "
                f"--team-namespace NS: {', '.join(TEAM_NAMESPACES)}), not LocalQueue {namespace}/gpu") in message, message
    # what the runbook writes passes: a labelled ClusterQueue, a quota change of its own, an earlier release's
    # label replaced by gpushare, a flavor tolerating the pool's taint by key
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues",
                                        _cluster_queue("gpushare-test-new", OURS, OWN), dry_run="All")
    _patch(runbook_api, "clusterqueues", OWN, {"spec": _cluster_queue(OWN, OURS, OWN, "2")["spec"]})()
    _patch(runbook_api, "resourceflavors", OWN, {"spec": {"tolerations": [
        {"key": "gpu-mode", "operator": "Exists", "effect": "NoSchedule"}]}})()


@pytest.fixture
def earlier_release_flavor(cluster: Cluster, kueue_objects: None) -> Iterator[str]:
    """A flavor release 0.1.0 of the runbook created: labelled managed-by=gpushare-queue-backfill."""
    flavor = _flavor("gpushare-test-earlier", {"app.kubernetes.io/managed-by": "gpushare-queue-backfill"})
    cluster.custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor)
    yield flavor["metadata"]["name"]
    cluster.custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", flavor["metadata"]["name"])


def test_an_earlier_releases_object_may_be_relabelled(runbook_api: client.ApiClient, earlier_release_flavor: str) -> None:
    _patch(runbook_api, "resourceflavors", earlier_release_flavor, {"metadata": {"labels": OURS}})()
    message = _refusal(_patch(runbook_api, "resourceflavors", earlier_release_flavor, {"spec": {"nodeLabels": {"a": "b"}}}))
    assert "may write Kueue objects only labelled app.kubernetes.io/managed-by=gpushare" in message, message


def _namespace(name: str, labels: dict[str, str]) -> client.V1Namespace:
    return client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))


@pytest.mark.parametrize(("what", "name", "labels", "refusal"), [
    ("any name, privileged", "gpushare-test-anything",
     {**OURS, "pod-security.kubernetes.io/enforce": "privileged"}, "may create only the team namespaces an administrator "
     f"listed (gpushare rbac render --team-namespace NS: {', '.join(TEAM_NAMESPACES)}), not gpushare-test-anything"),
    ("a system one", "kube-gpushare-test", OURS, "not kube-gpushare-test"),
    ("a team's, privileged", TEAM_NAMESPACES[0], {**OURS, "pod-security.kubernetes.io/enforce": "privileged"},
     f"may not create namespace {TEAM_NAMESPACES[0]} with metadata.labels pod-security.kubernetes.io/enforce"),
    ("a team's, warned at baseline", TEAM_NAMESPACES[0], {**OURS, "pod-security.kubernetes.io/warn": "baseline"},
     "with metadata.labels pod-security.kubernetes.io/warn"),
    ("a team's, unlabelled", TEAM_NAMESPACES[0], {},
     f"may create a namespace only labelled app.kubernetes.io/managed-by=gpushare, not {TEAM_NAMESPACES[0]}"),
])
def test_namespaces_only_of_a_listed_team_labelled_and_not_below_restricted(
        runbook_api: client.ApiClient, what: str, name: str, labels: dict[str, str], refusal: str) -> None:
    core = client.CoreV1Api(runbook_api)
    message = _refusal(lambda: core.create_namespace(_namespace(name, labels), dry_run="All"))
    assert NAMESPACE_POLICY in message and refusal in message, (what, message)


def test_a_listed_team_namespace_labelled_as_the_runbook_does_may_be_created(runbook_api: client.ApiClient,
                                                                              cluster: Cluster) -> None:
    existing = {ns.metadata.name for ns in cluster.core.list_namespace().items}
    name = next((n for n in TEAM_NAMESPACES if n not in existing), None)
    if name is None:
        pytest.skip("every team namespace exists already")
    core = client.CoreV1Api(runbook_api)
    core.create_namespace(_namespace(name, OURS), dry_run="All")
    core.create_namespace(_namespace(name, {**OURS, "pod-security.kubernetes.io/enforce": "restricted"}), dry_run="All")


def test_of_kueue_s_namespace_the_runbook_reads_the_configuration_and_no_other_config_map(
        cluster: Cluster, runbook_api: client.ApiClient) -> None:
    """The plan reads Kueue's configuration (kueue-manager-config); the identity reads no other ConfigMap
    there and writes none. The DeviceClasses and ResourceSlices it lists; it writes neither here."""
    core = client.CoreV1Api(runbook_api)
    try:
        core.read_namespaced_config_map("kueue-manager-config", "kueue-system")
    except ApiException as err:
        assert err.status == 404, err.body  # allowed: an installation without the Helm chart's ConfigMap
    _refusal(lambda: core.read_namespaced_config_map("kube-root-ca.crt", "kueue-system"))
    _refusal(lambda: core.patch_namespaced_config_map("kueue-manager-config", "kueue-system", {"data": {}},
                                                      dry_run="All"))
    custom = client.CustomObjectsApi(runbook_api)
    for plural in ("deviceclasses", "resourceslices"):
        custom.list_cluster_custom_object("resource.k8s.io", "v1", plural)
