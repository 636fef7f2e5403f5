"""GFD's NodeFeature (k8s-device-plugin internal/lm/output.go) and what nfd-master writes to the node
from a node's NodeFeature objects (node-feature-discovery pkg/nfd-master/nfd-master.go)."""

from __future__ import annotations

from gpushare_testbed.simulator import nfd


def feature(name: str, namespace: str, node: str, labels: dict[str, str]) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {nfd.NODE_NAME_LABEL: node}},
            "spec": {"labels": labels}}


def test_gfd_object_is_named_for_its_node_labelled_with_it_and_owned_by_daemonset_and_pod() -> None:
    owners = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "gpu-feature-discovery", "uid": "d", "controller": True},
              {"apiVersion": "v1", "kind": "Pod", "name": "gpu-feature-discovery-x", "uid": "p"}]
    obj = nfd.gfd_object("gpu-node", "gpu-operator", {"nvidia.com/gpu.replicas": "2"}, owners)
    assert obj["metadata"]["name"] == "nvidia-features-for-gpu-node"
    assert obj["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": "gpu-node"}
    assert obj["metadata"]["ownerReferences"] == owners
    assert obj["spec"]["labels"] == {"nvidia.com/gpu.replicas": "2"}
    assert nfd.node_of(obj) == "gpu-node"


def test_labels_merge_own_namespace_first_then_by_name_the_later_winning() -> None:
    objects = [
        feature("nvidia-features-for-n", "gpu-operator", "n", {"nvidia.com/gpu.replicas": "2", "pci-10de.present": "true"}),
        feature("n", "gpu-operator", "n", {"nvidia.com/gpu.replicas": "1"}),  # nfd-worker's
        feature("a-third-party", "elsewhere", "n", {"nvidia.com/gpu.replicas": "9"}),
    ]
    assert nfd.merged_labels(objects, "gpu-operator") == {
        "nvidia.com/gpu.replicas": "9",  # objects of other namespaces come last
        "feature.node.kubernetes.io/pci-10de.present": "true",  # unprefixed: NFD's namespace
    }
    assert nfd.merged_labels(objects[:2], "gpu-operator")["nvidia.com/gpu.replicas"] == "2"  # "n" < "nvidia-..."


def test_labels_in_the_kubernetes_io_namespace_are_dropped_but_nfds_own() -> None:
    objects = [feature("x", "ns", "n", {"node-role.kubernetes.io/gpu": "", "kubernetes.io/arch": "x",
                                         "sub.feature.node.kubernetes.io/a": "1", "example.k8s.io/b": "2"})]
    assert nfd.merged_labels(objects, "ns") == {"sub.feature.node.kubernetes.io/a": "1", "example.k8s.io/b": "2"}


def test_the_node_gets_the_labels_and_the_annotation_naming_them() -> None:
    wanted = {"nvidia.com/gpu.replicas": "2", "feature.node.kubernetes.io/pci-10de.present": "true"}
    patch = nfd.node_update({"nvidia.com/gpu.replicas": "1", "other": "x"}, {}, wanted)
    assert patch == {"labels": {"nvidia.com/gpu.replicas": "2", "feature.node.kubernetes.io/pci-10de.present": "true"},
                     "annotations": {nfd.FEATURE_LABELS_ANNOTATION: "nvidia.com/gpu.replicas,pci-10de.present"}}


def test_labels_it_wrote_before_and_no_longer_has_are_removed_others_kept() -> None:
    labels = {"nvidia.com/gpu.replicas": "2", "nvidia.com/mig.strategy": "single", "mine": "x"}
    annotations = {nfd.FEATURE_LABELS_ANNOTATION: "nvidia.com/gpu.replicas,nvidia.com/mig.strategy"}
    assert nfd.node_update(labels, annotations, {"nvidia.com/gpu.replicas": "2"}) == {
        "labels": {"nvidia.com/mig.strategy": None},
        "annotations": {nfd.FEATURE_LABELS_ANNOTATION: "nvidia.com/gpu.replicas"}}
    # nothing left: every label it manages goes, and its annotation
    assert nfd.node_update(labels, annotations, {}) == {
        "labels": {"nvidia.com/gpu.replicas": None, "nvidia.com/mig.strategy": None},
        "annotations": {nfd.FEATURE_LABELS_ANNOTATION: None}}


def test_a_node_that_carries_the_labels_already_needs_no_write() -> None:
    annotations = {nfd.FEATURE_LABELS_ANNOTATION: "nvidia.com/gpu.replicas"}
    assert nfd.node_update({"nvidia.com/gpu.replicas": "2"}, annotations, {"nvidia.com/gpu.replicas": "2"}) == {}
