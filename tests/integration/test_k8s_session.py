"""gpushare.k8s.session.Session against the real API server: each verb, what a missing object, a
kind the cluster does not serve and a server that does not answer look like to the runbooks."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
import yaml

from gpushare.k8s import session as k8s_session
from gpushare.k8s.kinds import kind_of
from gpushare.k8s.session import ApiError, KindNotServed, Session, Unreachable
from gpushare.polling import wait_for
from tests.integration.k8s_fixtures import namespace, session  # noqa: F401 - fixtures
from tests.support.cluster import Cluster

pytestmark = pytest.mark.cluster


def configmap(name: str, ns: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def test_get_returns_the_object_or_none(session: Session, namespace: str) -> None:
    created = session.create(configmap("probe", namespace, a="1"))
    got = session.get("ConfigMap", "probe", namespace)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert got["data"] == {"a": "1"}
    assert session.get("ConfigMap", "absent", namespace) is None
    assert session.get("ConfigMap", "probe", "no-such-namespace") is None
    assert session.get("Node", f"no-such-node-{uuid.uuid4().hex[:6]}") is None


def test_list_items_describe_themselves_and_selectors_filter(session: Session, namespace: str) -> None:
    session.create({**configmap("one", namespace), "metadata": {"name": "one", "namespace": namespace,
                                                                 "labels": {"pick": "yes"}}})
    session.create(configmap("two", namespace))
    items = session.list("ConfigMap", namespace)
    assert {i["metadata"]["name"] for i in items} >= {"one", "two"}
    assert {(i["kind"], i["apiVersion"]) for i in items} == {("ConfigMap", "v1")}
    assert [i["metadata"]["name"] for i in session.list("ConfigMap", namespace, label_selector="pick=yes")] == ["one"]
    assert [i["metadata"]["name"] for i in session.list("ConfigMap", namespace,
                                                         field_selector="metadata.name=two")] == ["two"]
    leases = session.list("Lease", "kube-node-lease")
    assert leases and {(i["kind"], i["apiVersion"]) for i in leases} == {("Lease", "coordination.k8s.io/v1")}


def test_create_never_overwrites(session: Session, namespace: str) -> None:
    session.create(configmap("probe", namespace, a="1"))
    with pytest.raises(ApiError) as refused:
        session.create(configmap("probe", namespace, a="2"))
    assert refused.value.status == 409 and not isinstance(refused.value, KindNotServed)
    assert refused.value.details.get("name") == "probe"
    assert session.get("ConfigMap", "probe", namespace)["data"] == {"a": "1"}


def test_patches(session: Session, namespace: str) -> None:
    session.create(configmap("probe", namespace, a="1", b="2"))
    merged = session.patch("ConfigMap", "probe", {"data": {"a": None, "c": "3"}}, namespace)
    assert merged["data"] == {"b": "2", "c": "3"}
    patched = session.patch("ConfigMap", "probe", [{"op": "test", "path": "/data/b", "value": "2"},
                                                   {"op": "replace", "path": "/data/b", "value": "4"}],
                            namespace, patch_type="json")
    assert patched["data"] == {"b": "4", "c": "3"}
    with pytest.raises(ApiError) as refused:
        session.patch("ConfigMap", "probe", [{"op": "test", "path": "/data/b", "value": "2"},
                                             {"op": "remove", "path": "/data/c"}], namespace, patch_type="json")
    assert refused.value.status == 422
    assert session.get("ConfigMap", "probe", namespace)["data"] == {"b": "4", "c": "3"}


def test_replace_at_a_stale_version_is_a_conflict(session: Session, namespace: str) -> None:
    created = session.create(configmap("probe", namespace, a="1"))
    session.patch("ConfigMap", "probe", {"data": {"a": "2"}}, namespace)
    with pytest.raises(ApiError) as refused:
        session.replace(created)  # still carries the version it was created at
    assert refused.value.status == 409
    assert session.get("ConfigMap", "probe", namespace)["data"] == {"a": "2"}


def test_dry_runs_persist_nothing(session: Session, namespace: str) -> None:
    dry = session.create(configmap("probe", namespace, a="1"), dry_run=True)
    assert dry["metadata"]["name"] == "probe"
    assert session.get("ConfigMap", "probe", namespace) is None
    session.create(configmap("probe", namespace, a="1"))
    assert session.patch("ConfigMap", "probe", {"data": {"a": "2"}}, namespace, dry_run=True)["data"] == {"a": "2"}
    session.replace({**configmap("probe", namespace, a="3")}, dry_run=True)
    session.delete("ConfigMap", "probe", namespace, dry_run=True)
    assert session.get("ConfigMap", "probe", namespace)["data"] == {"a": "1"}


def test_delete(session: Session, namespace: str) -> None:
    created = session.create(configmap("probe", namespace))
    with pytest.raises(ApiError) as refused:
        session.delete("ConfigMap", "probe", namespace, preconditions={"uid": "not-its-uid"})
    assert refused.value.status == 409
    with pytest.raises(ApiError):
        session.delete("ConfigMap", "probe", namespace, preconditions={"resourceVersion": "1"})
    assert session.delete("ConfigMap", "probe", namespace,
                          preconditions={"uid": created["metadata"]["uid"]}) is not None
    assert session.get("ConfigMap", "probe", namespace) is None
    assert session.delete("ConfigMap", "probe", namespace) is None


def pod(name: str, node: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


def running(session: Session, name: str, ns: str) -> dict | None:
    found = session.get("Pod", name, ns)
    return found if found and (found.get("status") or {}).get("phase") == "Running" else None


def test_evict(cluster: Cluster, session: Session, namespace: str) -> None:
    node = sorted(session.list("Node"), key=lambda n: n["metadata"]["name"])[0]["metadata"]["name"]
    for name in ("kept", "evicted"):
        session.create({**pod(name, node, {"app": name}), "metadata": {"name": name, "namespace": namespace,
                                                                         "labels": {"app": name}}})
    for name in ("kept", "evicted"):
        wait_for(lambda name=name: running(session, name, namespace), 60, f"pod {name} to run")
    session.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "keep-one", "namespace": namespace},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}}})

    session.evict("evicted", namespace, dry_run=True)
    assert running(session, "evicted", namespace)
    with pytest.raises(ApiError) as replaced:  # the uid of a pod this name no longer is
        session.evict("evicted", namespace, uid=str(uuid.uuid4()))
    assert replaced.value.status == 409
    assert running(session, "evicted", namespace)
    session.evict("evicted", namespace, grace_period_seconds=0)
    wait_for(lambda: session.get("Pod", "evicted", namespace) is None, 60, "the evicted pod to be gone")

    with pytest.raises(ApiError) as refused:
        session.evict("kept", namespace)
    assert refused.value.status == 429
    assert "keep-one" in str(refused.value.details) + refused.value.message
    assert running(session, "kept", namespace)

    with pytest.raises(ApiError) as missing:
        session.evict("absent", namespace)
    assert missing.value.status == 404 and not isinstance(missing.value, KindNotServed)


def test_a_kind_the_cluster_does_not_serve(session: Session) -> None:
    unserved = kind_of("ClusterPolicy", "nvidia.com/v0alpha0")
    with pytest.raises(KindNotServed) as get:
        session.get(unserved, "cluster-policy")
    assert get.value.status == 404
    with pytest.raises(KindNotServed):
        session.list(unserved)
    with pytest.raises(KindNotServed):
        session.delete(unserved, "cluster-policy")


def test_an_unreachable_server_is_named(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(k8s_session, "RETRY_WINDOW_S", 0.0)  # the refusal once, not ridden out as a restart
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before the request: nothing listens there
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in kubeconfig["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    offline = Session(tmp_path / "kubeconfig")
    with pytest.raises(Unreachable) as failed:
        offline.get("Node", "gpu-node")
    assert failed.value.server == f"https://127.0.0.1:{port}"
    assert f"the Kubernetes API at https://127.0.0.1:{port} did not answer" in str(failed.value)
    assert failed.value.status == 0


def test_whoami(cluster: Cluster, session: Session) -> None:
    user = session.whoami()
    assert user
    if cluster.embedded:
        assert user == "gpushare-admin"


def test_may_is_the_authorizers_answer_for_this_identity(cluster: Cluster) -> None:
    """A SelfSubjectAccessReview per question: the runbook identity may patch the time-slicing
    ConfigMap deploy/rbac names, not another one; an administrator may both."""
    if cluster.runbook_kubeconfig == cluster.kubeconfig:
        pytest.skip("the runbooks run with the admin kubeconfig here: pass --runbook-kubeconfig")
    runbook, admin = Session(cluster.runbook_kubeconfig), Session(cluster.kubeconfig)
    ns = cluster.operator_namespace
    allowed, reason = runbook.may("patch", "ConfigMap", ns, "time-slicing-config")
    assert allowed and ("gpushare-enable-timeslicing" in reason or "gpushare-rollback-timeslicing" in reason), reason
    assert runbook.may("patch", "ConfigMap", ns, "other-config")[0] is False
    assert runbook.may("create", "ConfigMap", ns)[0] is True  # RBAC cannot name a create
    assert runbook.may("delete", "Node", name="gpu-node")[0] is False
    assert admin.may("patch", "ConfigMap", ns, "other-config")[0] is True


def test_a_text_body_goes_as_it_is_and_requests_name_gpushare(cluster: Cluster, session: Session, namespace: str) -> None:
    """A server-side apply's YAML is sent as written, not as a JSON string; the audit log names the
    runbooks' requests by their User-Agent."""
    manifest = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {namespace}\ndata:\n  k: v\n"
    mark = cluster.audit_mark() if cluster.embedded else 0
    applied = session.request("PATCH", kind_of("ConfigMap").path(namespace, "applied"), body=manifest,
                              query={"fieldManager": "gpushare-test"}, content_type="application/apply-patch+yaml")
    assert applied["data"] == {"k": "v"}
    if cluster.embedded:
        def agents() -> set[str] | None:
            found = {e.get("userAgent") for e in cluster.audit_events(mark)
                     if (e.get("objectRef") or {}).get("name") == "applied"}
            return found or None

        assert wait_for(agents, 10, "the apply in the audit log") == {k8s_session.USER_AGENT}
