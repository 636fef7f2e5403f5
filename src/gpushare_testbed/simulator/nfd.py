"""Node Feature Discovery's part, with no I/O: the NodeFeature CRD, the object GFD publishes its
labels in from k8s-device-plugin v0.19 (internal/lm/output.go, nodeFeatureObject.Output), and what
nfd-master makes of the NodeFeature objects of a node (kubernetes-sigs/node-feature-discovery
pkg/nfd-master/nfd-master.go: getAndMergeNodeFeatures, filterFeatureLabel, updateNodeObject)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]
GROUP, VERSION, PLURAL, KIND = "nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", "NodeFeature"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"  # api/nfd/v1alpha1 NodeFeatureObjNodeNameLabel
FEATURE_LABELS_ANNOTATION = "nfd.node.kubernetes.io/feature-labels"  # the labels nfd-master manages
FEATURE_LABEL_NS = "feature.node.kubernetes.io"
_ALLOWED_K8S_NS = (FEATURE_LABEL_NS, "profile.node.kubernetes.io")
GFD_PREFIX = "nvidia-features-for"


def crd() -> Obj:
    """The NodeFeature CRD (the gpu-operator chart installs it with its NFD subchart: namespaced,
    `spec.labels` a map of strings, `spec.features` kept as given)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "nodefeature", "kind": KIND, "listKind": f"{KIND}List"},
            "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "features": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}],
        },
    }


def gfd_object_name(node: str) -> str:
    return f"{GFD_PREFIX}-{node}"


def gfd_object(node: str, namespace: str, labels: dict[str, str], owners: list[Obj]) -> Obj:
    """GFD's NodeFeature for a node: its labels, owned by GFD's DaemonSet (controller) and pod."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
        "metadata": {"name": gfd_object_name(node), "namespace": namespace, "labels": {NODE_NAME_LABEL: node},
                     "ownerReferences": owners},
        "spec": {"features": {}, "labels": dict(labels)},
    }


def node_of(obj: Obj) -> str:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(NODE_NAME_LABEL, "")


def _allowed(name: str) -> bool:
    """filterFeatureLabel with the default configuration (no denyLabelNs): validate.Label refuses the
    kubernetes.io namespace and its subdomains but NFD's own (pkg/apis/nfd/validate/validate.go)."""
    namespace = name.split("/", 1)[0]
    if namespace in _ALLOWED_K8S_NS or namespace.endswith(tuple(f".{ns}" for ns in _ALLOWED_K8S_NS)):
        return True
    return not (namespace == "kubernetes.io" or namespace.endswith(".kubernetes.io"))


def merged_labels(objects: Iterable[Obj], nfd_namespace: str) -> dict[str, str]:
    """The labels of a node's NodeFeature objects merged as nfd-master does: objects of its own
    namespace first, then by name, a later object's label winning; unprefixed names in the
    feature.node.kubernetes.io namespace; labels in a denied namespace dropped."""
    def order(obj: Obj) -> tuple[bool, str, str]:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") != nfd_namespace, meta.get("name", ""), meta.get("namespace", "")

    merged: dict[str, str] = {}
    for obj in sorted(objects, key=order):
        for name, value in ((obj.get("spec") or {}).get("labels") or {}).items():
            full = name if "/" in name else f"{FEATURE_LABEL_NS}/{name}"
            if _allowed(full):
                merged[full] = str(value)
    return merged


def node_update(labels: dict[str, str], annotations: dict[str, str], wanted: dict[str, str]) -> Obj:
    """The metadata patch that makes a node carry `wanted`: labels set or changed, the labels it
    managed before and no longer has removed, and the annotation naming what it manages (names in
    the default namespace without the prefix) rewritten."""
    managed = [n if "/" in n else f"{FEATURE_LABEL_NS}/{n}"
               for n in (annotations.get(FEATURE_LABELS_ANNOTATION) or "").split(",") if n]
    label_patch: dict[str, str | None] = {n: None for n in managed if n not in wanted and n in labels}
    label_patch.update({n: v for n, v in wanted.items() if labels.get(n) != v})
    names = ",".join(sorted(n.removeprefix(f"{FEATURE_LABEL_NS}/") for n in wanted)) or None
    annotation_patch = {FEATURE_LABELS_ANNOTATION: names} if annotations.get(FEATURE_LABELS_ANNOTATION) != names else {}
    return {"labels": label_patch, "annotations": annotation_patch} if label_patch or annotation_patch else {}
