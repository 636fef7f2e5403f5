"""The verify of the DRA pilot: one ResourceClaim of the pilot's DeviceClass shared by four pods on
the pilot node (they tolerate the pilot taint), and one pod asking for nvidia.com/gpu that must land
on another node, served by the device plugin there. The claim and its pods stay (the rollback deletes
them); the nvidia.com/gpu pod is deleted once seen Running."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpushare.dra.plan import CHECK_LABEL, TAINT
from gpushare.dra.pool import Pool
from gpushare.dra.settings import PilotSettings
from gpushare.k8s.changes import Change

CLAIM = "gpushare-dra-pilot-{node}"
PODS = 4
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}  # Pod Security "restricted"


def _pod(name: str, node: str, settings: PilotSettings, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": settings.check_namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpushare", CHECK_LABEL: node}},
            "spec": {"terminationGracePeriodSeconds": 0, "restartPolicy": "Never", "securityContext": {
                "runAsNonRoot": True, "runAsUser": 65535, "seccompProfile": {"type": "RuntimeDefault"}}, **spec}}


@dataclass(frozen=True)
class VerifyPlan:
    expected: dict[str, Any]
    create: list[Change]  # the claim, its pods, the bystander: kept when there
    cleanup: list[Change]  # the bystander, once seen Running

    def as_dict(self) -> dict[str, Any]:
        return {"expected": self.expected, "create": [c.as_dict() for c in self.create],
                "cleanup": [c.as_dict() for c in self.cleanup]}


def plan(node: str, gpus: int, settings: PilotSettings) -> VerifyPlan:
    claim = CLAIM.format(node=node)
    names = [f"{claim}-{i}" for i in range(PODS)]
    bystander = f"gpushare-dra-bystander-{node}"
    claim_body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": claim, "namespace": settings.check_namespace,
                               "labels": {"app.kubernetes.io/managed-by": "gpushare", CHECK_LABEL: node}},
                  "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                      "deviceClassName": settings.class_name, "allocationMode": "ExactCount", "count": 1}}]}}}
    container = {"name": "main", "image": settings.check_image, "securityContext": RESTRICTED,
                 "resources": {"claims": [{"name": "gpu"}]}}
    sharing = [_pod(name, node, settings, {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{**TAINT, "operator": "Equal"}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
        "containers": [container]}) for name in names]
    elsewhere = _pod(bystander, node, settings, {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [node]}]}]}}},
        "containers": [{"name": "main", "image": settings.check_image, "securityContext": RESTRICTED,
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})
    create = [Change("create", obj["kind"], obj["metadata"]["name"], namespace=settings.check_namespace, body=obj,
                     exists="keep", why=why)
              for obj, why in [(claim_body, "the claim the check pods share"),
                               *((p, "a check pod on the pilot node") for p in sharing),
                               (elsewhere, "a nvidia.com/gpu pod on another node")]]
    cleanup = [Change("delete", "Pod", bystander, namespace=settings.check_namespace,
                      why="the nvidia.com/gpu check pod has run")]
    expected = {"node": node, "gpus": gpus, "driver": settings.readiness.device_class, "claim": claim, "pods": names,
                "bystander": bystander, "check_namespace": settings.check_namespace, "gpu_config": settings.gpu_config()}
    return VerifyPlan(expected, create, cleanup)


def claim_uuid(claim: dict[str, Any] | None, slices: list[dict[str, Any]], expected: dict[str, Any]) -> str:
    """The UUID of the card the verify's claim got: the `uuid` attribute of its one result's device in
    the node's pool ('' when the claim has no single result or the device no uuid)."""
    results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    if len(results) != 1:
        return ""
    return Pool.of(slices, expected["driver"], expected["node"]).devices.get(results[0].get("device", ""), "")
