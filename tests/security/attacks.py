"""Writes the runbook identity must never get through: one field of an object set to a value the
runbooks never write, sent in every form the API server takes (merge patch, JSON patch, strategic
merge patch, server-side apply, update). Pure: the request bodies are built from the live object."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

FORMS = ("merge", "json", "strategic", "apply", "update")
CUSTOM_FORMS = ("merge", "json", "apply", "update")  # a custom resource takes no strategic merge patch
MISSING = object()
# An owner that does not exist: the garbage collector deletes what names it within seconds.
GHOST_OWNER = {"apiVersion": "v1", "kind": "Namespace", "name": "gpushare-gone",
               "uid": "00000000-0000-0000-0000-00000000dead"}
FOREIGN_LABEL = {"evil.example.com/owner": "attacker"}


@dataclass(frozen=True)
class Mutation:
    """`path` (keys from the object's root) set to `value` (with `append`, a list's items added to it)."""

    path: tuple[str, ...]
    value: Any
    why: str
    append: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def merged(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` with the mutation applied (maps merged, anything else replaced)."""
        out = copy.deepcopy(obj)
        node = out
        for key in self.path[:-1]:
            node = node.setdefault(key, {})
        last = self.path[-1]
        if isinstance(self.value, dict) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **self.value}
        elif self.append:
            node[last] = [*(node.get(last) or []), *copy.deepcopy(self.value)]
        else:
            node[last] = copy.deepcopy(self.value)
        return out

    def nested(self, value: Any = MISSING) -> dict[str, Any]:
        """{path[0]: {path[1]: ... value}}: a merge patch, or the part of an applied configuration."""
        body: Any = self.value if value is MISSING else value
        for key in reversed(self.path):
            body = {key: body}
        return body

    def body(self, form: str, obj: dict[str, Any]) -> Any:
        """The request body of `form` that makes this change to `obj` (as read)."""
        metadata = obj["metadata"]
        if form in ("merge", "strategic"):
            return self.nested(self._full(obj))
        if form == "json":
            return [{"op": "add", "path": "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in self.path),
                     "value": self._full(obj)}]
        if form == "apply":
            ident = {k: metadata[k] for k in ("name", "namespace") if k in metadata}
            applied = self.nested(self._full(obj))
            applied["metadata"] = {**applied.get("metadata", {}), **ident}
            return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **applied}
        if form == "update":
            return self.merged(obj)
        raise ValueError(form)

    def _full(self, obj: dict[str, Any]) -> Any:
        """The value at `path` once mutated: maps keep what they held (a JSON patch `add` replaces)."""
        return _at(self.merged(obj), self.path)

    def took(self, before: dict[str, Any], answer: dict[str, Any]) -> bool:
        """Whether the API server's answer (a dry run's object) holds the mutation."""
        return _at(answer, self.path) == _at(self.merged(before), self.path) != _at(before, self.path)


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def metadata_attacks() -> list[Mutation]:
    """ObjectMeta fields no runbook writes on any object it writes."""
    return [
        Mutation(("metadata", "ownerReferences"), [GHOST_OWNER], "the garbage collector deletes the object"),
        Mutation(("metadata", "finalizers"), ["evil.example.com/hold"], "the object can never be deleted"),
        Mutation(("metadata", "generateName"), "evil-", "a metadata field no runbook writes"),
    ]


def node_attacks(pool_label_key: str) -> list[Mutation]:
    """Node fields and values outside the runbooks' write model (deploy/rbac/60-admission-policies.yaml)."""
    return [
        *metadata_attacks(),
        Mutation(("metadata", "labels"), FOREIGN_LABEL, "a label the runbooks do not own"),
        Mutation(("metadata", "labels"), {"node-role.kubernetes.io/control-plane": ""}, "a role label"),
        Mutation(("metadata", "annotations"), {"evil.example.com/x": "y"}, "an annotation outside gpushare.io/"),
        Mutation(("spec", "providerID"), "kwok://evil", "the node's cloud identity"),
        Mutation(("spec", "podCIDR"), "10.199.0.0/24", "the node's pod network"),
        Mutation(("spec", "podCIDRs"), ["10.199.0.0/24"], "the node's pod networks"),
        Mutation(("spec", "externalID"), "evil", "a deprecated identity field"),
        Mutation(("spec", "taints"), [{"key": "evil.example.com/x", "effect": "NoSchedule"}], "a foreign taint",
                 append=True),
        Mutation(("spec", "taints"), [{"key": "nvidia.com/gpu", "value": "shared", "effect": "NoExecute"}],
                 "the pool taint as NoExecute: evicts every pod at once, past PodDisruptionBudgets", append=True),
        Mutation(("spec", "taints"), [{"key": pool_label_key, "value": "shared", "effect": "PreferNoSchedule"}],
                 "the pool label's taint with another effect", append=True),
    ]


def pool_taint_attacks(pool_taint_key: str, pool_taint_value: str, pool_label_key: str) -> list[Mutation]:
    """Taints under the pool taint's key (and the pilot's nvidia.com/gpu) the runbooks never write: the write
    model allows there only the pool taint as rendered (pool-taint-key=pool-taint-value:NoSchedule) and the DRA
    pilot's nvidia.com/gpu=dra-pilot:NoSchedule."""
    def taint(key: str, value: str | None, effect: str) -> dict[str, str]:
        return {"key": key, "effect": effect, **({"value": value} if value is not None else {})}

    return [Mutation(("spec", "taints"), [found], why, append=True) for found, why in (
        (taint(pool_taint_key, "dedicated", "NoSchedule"), "another value under the pool taint's key"),
        (taint(pool_taint_key, None, "NoSchedule"), "the pool taint's key without its value"),
        (taint(pool_taint_key, pool_taint_value, "PreferNoSchedule"), "the pool taint with another effect"),
        (taint("nvidia.com/gpu", "dra-pilot-x", "NoSchedule"), "a value beside the pilot's under nvidia.com/gpu"),
        (taint(pool_label_key, pool_taint_value, "NoSchedule"), "a taint keyed by the pool label"),
    )]


# ObjectMeta and NodeSpec fields the API server owns or refuses to change on its own: not attacks.
SERVER_OWNED_METADATA = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                                   "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})
# Owned by the runbooks, their values checked by node_attacks.
NODE_OWNED = frozenset({"labels", "annotations", "taints", "unschedulable"})
NODE_COVERED = frozenset({"ownerReferences", "finalizers", "generateName", "labels", "annotations", "providerID",
                          "podCIDR", "podCIDRs", "externalID", "taints", "configSource"})


def clusterpolicy_attacks(policy: dict[str, Any]) -> list[Mutation]:
    """Every ClusterPolicy field the runbooks do not own, from the live object: each spec section but
    devicePlugin and daemonsets, each of their keys but config and tolerations, its metadata; and
    values outside the owned fields' allowed sets."""
    spec = policy.get("spec") or {}
    out = [*metadata_attacks(),
           Mutation(("metadata", "labels"), FOREIGN_LABEL, "a label on the ClusterPolicy"),
           Mutation(("metadata", "annotations"), {"evil.example.com/x": "y"}, "an annotation on the ClusterPolicy")]
    for key, value in sorted(spec.items()):
        if key not in ("devicePlugin", "daemonsets"):
            out.append(Mutation(("spec", key), _changed(value), f"spec.{key}: an operand's settings"))
    for section, owned in (("devicePlugin", "config"), ("daemonsets", "tolerations")):
        for key, value in sorted((spec.get(section) or {}).items()):
            if key != owned:
                out.append(Mutation(("spec", section, key), _changed(value), f"spec.{section}.{key}"))
    out += [
        Mutation(("spec", "devicePlugin", "config"), {"name": "evil-config", "default": "any"},
                 "the device plugin pointed at a ConfigMap the runbooks did not render (allocatable x64)"),
        Mutation(("spec", "devicePlugin", "config"), {"name": "time-slicing-config", "default": "any", "x": "y"},
                 "a key beside name and default"),
        Mutation(("spec", "daemonsets", "tolerations"), [{"operator": "Exists"}],
                 "every operand tolerates every taint", append=True),
        Mutation(("spec", "daemonsets", "tolerations"), [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}],
                 "a toleration the pool taint does not need", append=True),
    ]
    return out


def _changed(value: Any) -> Any:
    """A value of the same shape that differs from `value`."""
    if isinstance(value, dict):
        return {**value, "gpushareAttack": "x"}
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, list):
        return [*value, "gpushare-attack"]
    return f"{value}-gpushare-attack"


def record_attacks() -> list[Mutation]:
    """A run record's metadata: what the runbooks never write on it."""
    return [*metadata_attacks(),
            Mutation(("metadata", "labels"), {"app.kubernetes.io/managed-by": "someone-else"},
                     "the record's managed-by label changed")]


def lease_attacks() -> list[Mutation]:
    return [*metadata_attacks(),
            Mutation(("metadata", "labels"), {"app.kubernetes.io/managed-by": "someone-else"}, "the lock's label"),
            Mutation(("spec", "leaseDurationSeconds"), 10**8, "a lock held for three years"),
            Mutation(("spec", "holderIdentity"), "", "a lock with no holder")]


# The DRA pilot's DeviceClass (gpushare.dra.plan.device_class) as enable-dra-pilot.yml writes it.
PILOT_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
TIME_SLICING = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}


def deviceclass_attacks() -> list[Mutation]:
    """DeviceClass fields and values outside what the DRA pilot writes (deploy/rbac/51-dra-readiness.yaml)."""
    opaque = {"driver": "gpu.nvidia.com", "parameters": TIME_SLICING}
    return [
        *metadata_attacks(),
        Mutation(("metadata", "labels"), FOREIGN_LABEL, "a label the pilot does not write"),
        Mutation(("metadata", "annotations"), {"evil.example.com/x": "y"}, "an annotation"),
        Mutation(("spec", "config"), [{"opaque": opaque}], "a second config entry", append=True),
        Mutation(("spec", "config"), [{"opaque": {**opaque, "driver": "evil.example.com"}}], "another driver's config"),
        Mutation(("spec", "config"), [{"opaque": {**opaque, "parameters": {**TIME_SLICING, "kind": "MigDeviceConfig"}}}],
                 "another kind of the driver's config"),
        Mutation(("spec", "config"), [{"opaque": {**opaque, "parameters": {
            **TIME_SLICING, "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 100,
                                                                          "defaultPinnedDeviceMemoryLimit": "80Gi"}}}}}],
                 "a GpuConfig the pilot never writes"),
        Mutation(("spec", "config"), [{"opaque": {**opaque, "parameters": {**TIME_SLICING, "evil": True}}}],
                 "a field beside the GpuConfig's"),
        Mutation(("spec", "extendedResourceName"), "nvidia.com/gpu", "every nvidia.com/gpu pod mapped onto the class"),
        Mutation(("spec", "selectors"), [{"cel": {"expression": "true"}}], "every device of every driver"),
        Mutation(("spec", "selectors"), [{"cel": {"expression": PILOT_SELECTOR + " || true"}}],
                 "the pilot's selector, widened"),
        Mutation(("spec", "selectors"), [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                 "NVIDIA's devices of every type (MIG slices, channels)"),
    ]


def dra_node_attacks() -> list[Mutation]:
    """The DRA pilot's node fields with values the pilot never writes: its two labels, other
    nvidia.com/gpu.deploy.* switches, its taint with another effect."""
    return [
        Mutation(("metadata", "labels"), {"nvidia.com/dra-kubelet-plugin": "false"}, "the DRA plugin label, not true"),
        Mutation(("metadata", "labels"), {"nvidia.com/dra-kubelet-plugin": "yes"}, "the DRA plugin label, not true"),
        Mutation(("metadata", "labels"), {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"},
                 "the device-plugin switch, neither true nor false"),
        Mutation(("metadata", "labels"), {"nvidia.com/gpu.deploy.driver": "false"}, "the driver switched off"),
        Mutation(("metadata", "labels"), {"nvidia.com/gpu.deploy.dcgm-exporter": "false"}, "the gates' data switched off"),
        Mutation(("metadata", "labels"), {"nvidia.com/dra-kubelet-plugin-evil": "true"}, "a label beside the pilot's"),
        Mutation(("spec", "taints"), [{"key": "nvidia.com/gpu", "value": "dra-pilot", "effect": "NoExecute"}],
                 "the pilot taint as NoExecute: evicts every pod at once", append=True),
        Mutation(("spec", "taints"), [{"key": "nvidia.com/gpu", "value": "dra-pilot", "effect": "PreferNoSchedule"}],
                 "the pilot taint with another effect", append=True),
        Mutation(("spec", "taints"), [{"key": "nvidia.com/dra-kubelet-plugin", "effect": "NoSchedule"}],
                 "a taint keyed by the pilot's label", append=True),
    ]
