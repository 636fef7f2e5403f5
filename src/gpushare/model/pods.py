"""Workload pods: how much of an extended resource a pod holds (counted as the scheduler counts
it), who re-creates it, and which nodes its required selection admits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpushare.model.taints import Taint, tolerated


def container_request(container: dict[str, Any], resource: str) -> int:
    """A container's amount of `resource`: its limit, else its request (extended resources need both equal)."""
    spec = container.get("resources") or {}
    wanted = {**(spec.get("requests") or {}), **(spec.get("limits") or {})}
    try:
        return max(int(str(wanted.get(resource) or 0)), 0)
    except ValueError:
        return 0


def pod_request(pod: dict[str, Any], resource: str) -> int:
    """The larger of the containers' sum and the largest init container (init containers run one
    at a time and their devices are reused by the containers after them); a sidecar (an init
    container with restartPolicy Always) keeps running, so it adds to both from its start."""
    spec = pod.get("spec") or {}
    containers = sum(container_request(c, resource) for c in spec.get("containers") or [])
    init = sidecars = 0
    for container in spec.get("initContainers") or []:
        amount = container_request(container, resource)
        if container.get("restartPolicy") == "Always":
            containers, sidecars = containers + amount, sidecars + amount
            init = max(init, sidecars)
        else:
            init = max(init, sidecars + amount)
    return max(containers, init)


UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
TERMINAL = ("Succeeded", "Failed")
DEFAULT_GRACE_S = 30  # PodSpec terminationGracePeriodSeconds when unset


@dataclass(frozen=True)
class Pod:
    """A workload pod as the rollback sees it: what it holds, who re-creates it, where it may land."""

    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.raw["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.raw["metadata"].get("namespace", "")

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def uid(self) -> str:
        return self.raw["metadata"].get("uid", "")

    @property
    def spec(self) -> dict[str, Any]:
        return self.raw.get("spec") or {}

    @property
    def node(self) -> str:
        return self.spec.get("nodeName") or ""

    @property
    def phase(self) -> str:
        return (self.raw.get("status") or {}).get("phase") or "Pending"

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL

    @property
    def terminating(self) -> bool:
        return bool(self.raw["metadata"].get("deletionTimestamp"))

    def holds(self, resources: tuple[str, ...]) -> dict[str, int]:
        asked = {r: pod_request(self.raw, r) for r in resources}
        return {r: n for r, n in asked.items() if n > 0}

    @property
    def controller(self) -> dict[str, str]:
        """{kind, name, uid} of the owner that re-creates the pod (ownerReference controller: true)."""
        for ref in self.raw["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                return {"kind": ref.get("kind", ""), "name": ref.get("name", ""), "uid": ref.get("uid", "")}
        return {}

    @property
    def workload(self) -> str:
        """What re-creates the pod, as an operator names it: `Deployment ns/name` for a ReplicaSet
        a Deployment made, else the controller's kind and name (`Pod ns/name` for a bare pod)."""
        owner = self.controller
        if owner.get("kind") == "ReplicaSet" and "pod-template-hash" in (self.raw["metadata"].get("labels") or {}):
            return f"Deployment {self.namespace}/{owner['name'].rsplit('-', 1)[0]}"
        return f"{owner.get('kind') or 'Pod'} {self.namespace}/{owner.get('name') or self.name}"

    @property
    def daemonset(self) -> bool:
        return self.controller.get("kind") == "DaemonSet"

    @property
    def uses_emptydir(self) -> bool:
        return any("emptyDir" in v for v in self.spec.get("volumes") or [])

    @property
    def grace_period_s(self) -> int:
        """How long the kubelet lets its containers stop once it is deleted or evicted before it kills
        them (terminationGracePeriodSeconds): as long as the pod stays, holding its devices."""
        value = self.spec.get("terminationGracePeriodSeconds")
        return value if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_GRACE_S

    def tolerations(self) -> list[dict[str, Any]]:
        return list(self.spec.get("tolerations") or [])

    @property
    def tolerates_cordon(self) -> bool:
        return tolerated(self.tolerations(), UNSCHEDULABLE)

    def cordon_toleration(self) -> str:
        toleration = next((t for t in self.tolerations() if tolerated([t], UNSCHEDULABLE)), {})
        return json.dumps(toleration, sort_keys=True)

    def tolerates_all(self, taints: list[Taint]) -> bool:
        """Tolerates each of `taints` that keeps the scheduler away (NoSchedule, NoExecute)."""
        return all(tolerated(self.tolerations(), t) for t in taints if t.effect in ("NoSchedule", "NoExecute"))

    def selects(self, name: str, labels: dict[str, str]) -> bool:
        """The pod's required node selection (nodeSelector, required node affinity) admits the node."""
        selector = self.spec.get("nodeSelector") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            return False
        required = (((self.spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = required.get("nodeSelectorTerms") or []
        return not terms or any(_term_matches(t, name, labels) for t in terms)

    def selection(self) -> str:
        """The pod's node selection in short, for messages ("" when it has none)."""
        parts = [f"nodeSelector {json.dumps(self.spec['nodeSelector'], sort_keys=True)}"] if self.spec.get(
            "nodeSelector") else []
        required = (((self.spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        if required:
            parts.append(f"required node affinity {json.dumps(required, sort_keys=True)}")
        return " and ".join(parts)

    def pending_reason(self) -> str:
        for condition in (self.raw.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return condition.get("message") or condition.get("reason") or ""
        return ""

    @property
    def unschedulable(self) -> bool:
        """The scheduler has said it cannot place the pod (PodScheduled False)."""
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (self.raw.get("status") or {}).get("conditions") or [])

    @property
    def reason(self) -> str:
        """Why the pod is in its phase: the kubelet's reason (UnexpectedAdmissionError), else the scheduler's."""
        status = self.raw.get("status") or {}
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        return status.get("reason") or (scheduled.get("reason") if scheduled.get("status") == "False" else "") or ""

    @property
    def message(self) -> str:
        """The kubelet's message for the phase, else the scheduler's reason for keeping it Pending."""
        return (self.raw.get("status") or {}).get("message") or self.pending_reason()


def _matches(expression: dict[str, Any], value: str | None) -> bool:
    operator, values = expression.get("operator"), [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and value.lstrip("-").isdigit() and values:
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False


def _term_matches(term: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term selects nothing
    return (all(_matches(e, labels.get(e.get("key", ""))) for e in expressions)
            and all(_matches(f, name if f.get("key") == "metadata.name" else None) for f in fields))


def outlasting_drain(pods: list[Pod], grace_override: int | None, timeout_s: int, timeout_var: str,
                     grace_var: str) -> list[str]:
    """A refusal for each pod whose grace period (the drain's `grace_override`, else its own) is not
    shorter than the drain's timeout: a pod whose process ignores SIGTERM stays that long, and the
    drain would stop with the node cordoned."""
    refusals = []
    for pod in pods:
        grace = pod.grace_period_s if grace_override is None else grace_override
        if grace >= timeout_s:
            own = "its terminationGracePeriodSeconds" if grace_override is None else grace_var
            refusals.append(f"Pod {pod.ref} may take {grace} s to stop once evicted ({own}), and the drain waits at "
                            f"most {timeout_s} s ({timeout_var}). Raise -e {timeout_var} above {grace}, or give the "
                            f"evicted pods less time with -e {grace_var}=<seconds>.")
    return refusals
