"""The runbooks' least-privilege identity: the manifests in deploy/rbac/, rendered for the names in
use (the operator namespace, the time-slicing ConfigMap, the pool label key, the team namespaces) and applied to a
cluster. `gpushare rbac render` prints them; `gpushare sim up` applies the same rendering."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpushare.binaries import REPO_ROOT
from gpushare.processes import ComponentError
from gpushare.runbook.inputs import DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, is_system_namespace

MANIFESTS = REPO_ROOT / "deploy" / "rbac"
SERVICE_ACCOUNT_NAMESPACE = "gpushare-system"
SERVICE_ACCOUNT = "gpushare-runbook"
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{SERVICE_ACCOUNT_NAMESPACE}:{SERVICE_ACCOUNT}"
# A client certificate cannot name a ServiceAccount: the embedded cluster's runbook certificate has
# this user, bound to the same roles.
RUNBOOK_USER = "gpushare-runbook"
# The names deploy/rbac/ is written for: the runbooks' defaults.
WRITTEN_FOR_NAMESPACE = "gpu-operator"
WRITTEN_FOR_CONFIGMAP = "time-slicing-config"  # timeslicing_configmap_name
WRITTEN_FOR_POOL_LABEL_KEY = "gpu-mode"  # timeslicing_pool_label_key (also the pool taint's key)
CONFIGMAPS_POLICY = "gpushare-runbook-configmaps"
NODES_POLICY = "gpushare-runbook-nodes"
# The policies that list the team namespaces (their variable TEAM_NAMESPACES, written for none) and
# the system namespaces (the operator namespace among them).
KUEUE_POLICIES = ("gpushare-runbook-kueue", "gpushare-runbook-namespaces")
TEAM_NAMESPACES = "teamNamespaces"

# A name as a whole token of a manifest's text (a CEL string literal, a message): not part of a longer name.
_NAME_CHARS = r"A-Za-z0-9_./-"


class RbacError(ComponentError):
    """deploy/rbac could not be read, rendered or applied; the message says why."""


@dataclass(frozen=True)
class Names:
    """The names the runbooks use that deploy/rbac/ names: the inputs gpu_operator_namespace,
    timeslicing_configmap_name and timeslicing_pool_label_key, and the team namespaces (those of
    queue_backfill_teams) where the queue-backfill runbook may create a Namespace and a LocalQueue."""

    operator_namespace: str = WRITTEN_FOR_NAMESPACE
    timeslicing_configmap: str = WRITTEN_FOR_CONFIGMAP
    pool_label_key: str = WRITTEN_FOR_POOL_LABEL_KEY
    team_namespaces: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        problems = []
        if not DNS_LABEL.fullmatch(self.operator_namespace):
            problems.append(f"operator namespace {self.operator_namespace!r} is not a valid namespace name (a DNS-1123 "
                            "label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)")
        if not DNS_SUBDOMAIN.fullmatch(self.timeslicing_configmap):
            problems.append(f"time-slicing ConfigMap {self.timeslicing_configmap!r} is not a valid ConfigMap name (a "
                            "DNS-1123 subdomain: at most 253 lowercase letters, digits, '-' and '.', each part starting "
                            "and ending with a letter or digit)")
        if not LABEL_KEY.fullmatch(self.pool_label_key):
            problems.append(f"pool label key {self.pool_label_key!r} is not a valid label key (an optional DNS-1123 "
                            "subdomain prefix and '/', then at most 63 letters, digits, '-', '_' and '.', starting and "
                            "ending with a letter or digit)")
        for namespace in self.team_namespaces:
            if not DNS_LABEL.fullmatch(namespace):
                problems.append(f"team namespace {namespace!r} is not a valid namespace name (a DNS-1123 label)")
            elif is_system_namespace(namespace, (self.operator_namespace,)):
                problems.append(f"team namespace {namespace!r} is a system namespace (kube-*, default, the operator "
                                "namespace, gpushare-system, kueue-system): the runbook identity may never write there")
        return problems

    def options(self, with_namespace: bool = False) -> str:
        """The `gpushare rbac render` options that give these names (the defaults left out, but for
        the operator namespace `with_namespace`)."""
        given = [("--operator-namespace", self.operator_namespace, WRITTEN_FOR_NAMESPACE),
                 ("--timeslicing-configmap", self.timeslicing_configmap, WRITTEN_FOR_CONFIGMAP),
                 ("--pool-label-key", self.pool_label_key, WRITTEN_FOR_POOL_LABEL_KEY)]
        return " ".join([f"{option} {value}" for option, value, default in given
                         if value != default or with_namespace and option == "--operator-namespace"]
                        + [f"--team-namespace {namespace}" for namespace in self.team_namespaces])

    def team_namespaces_cel(self) -> str:
        """The team namespaces as a CEL list literal (valid names only: no quote to escape)."""
        return "[" + ", ".join(f"'{namespace}'" for namespace in self.team_namespaces) + "]"


def _renamed(value: Any, old: str, new: str) -> Any:
    """`value` (the strings of a manifest, nested) with every whole-token `old` replaced by `new`."""
    if isinstance(value, str):
        return re.sub(rf"(?<![{_NAME_CHARS}]){re.escape(old)}(?![{_NAME_CHARS}])", new, value)
    if isinstance(value, list):
        return [_renamed(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, old, new) for k, v in value.items()}
    return value


def _render(obj: dict[str, Any], names: Names) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    if metadata.get("namespace") == WRITTEN_FOR_NAMESPACE:
        metadata["namespace"] = names.operator_namespace
    if obj.get("kind") in ("Role", "ClusterRole"):
        for rule in obj.get("rules") or []:
            if "configmaps" in (rule.get("resources") or []) and rule.get("resourceNames"):
                rule["resourceNames"] = [names.timeslicing_configmap if n == WRITTEN_FOR_CONFIGMAP else n
                                         for n in rule["resourceNames"]]
    elif obj.get("kind") == "ValidatingAdmissionPolicy":
        if metadata.get("name") == CONFIGMAPS_POLICY:
            obj["spec"] = _renamed(obj.get("spec"), WRITTEN_FOR_CONFIGMAP, names.timeslicing_configmap)
        elif metadata.get("name") == NODES_POLICY:
            obj["spec"] = _renamed(obj.get("spec"), WRITTEN_FOR_POOL_LABEL_KEY, names.pool_label_key)
        elif metadata.get("name") in KUEUE_POLICIES:
            obj["spec"] = _renamed(obj.get("spec"), WRITTEN_FOR_NAMESPACE, names.operator_namespace)
            for variable in obj["spec"].get("variables") or []:
                if variable.get("name") == TEAM_NAMESPACES:
                    variable["expression"] = names.team_namespaces_cel()
    return obj


def manifests(operator_namespace: str = WRITTEN_FOR_NAMESPACE, directory: Path = MANIFESTS,
              without_namespaces: tuple[str, ...] = (), names: Names | None = None) -> list[dict[str, Any]]:
    """Every object of deploy/rbac/ (not optional/), in file order, rendered for `names` (by default
    the runbooks' defaults with `operator_namespace`): the operator namespace, the time-slicing
    ConfigMap in the RBAC rules that name it and in the ConfigMap admission policy, the pool label key
    in the Node admission policy, the operator and team namespaces in the Kueue and Namespace admission
    policies; none of those in `without_namespaces` (of a component the cluster
    does not run). RbacError when a name is not valid."""
    names = names or Names(operator_namespace)
    problems = names.problems()
    if problems:
        raise RbacError("cannot render deploy/rbac: " + "; ".join(problems))
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise RbacError(f"no manifests in {directory}")
    objects = [_render(doc, names) for path in files for doc in yaml.safe_load_all(path.read_text()) if doc]
    return [o for o in objects if (o.get("metadata") or {}).get("namespace") not in without_namespaces]


def render(names: Names, directory: Path = MANIFESTS) -> str:
    """deploy/rbac/ as one YAML stream for `kubectl apply --server-side -f -`."""
    return yaml.safe_dump_all(manifests(directory=directory, names=names), sort_keys=False, explicit_start=True)


def apply(kubectl: Path, kubeconfig: Path, operator_namespace: str, without_namespaces: tuple[str, ...] = (),
          names: Names | None = None) -> None:
    """Apply deploy/rbac/ (as an administrator), rendered for `names` (by default the runbooks'
    defaults in `operator_namespace`), so that the runbook identity works."""
    names = names or Names(operator_namespace)
    stream = yaml.safe_dump_all(manifests(without_namespaces=without_namespaces, names=names), sort_keys=False)
    done = subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", "apply", "--server-side", "--filename=-"],
                          input=stream, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise RbacError(f"kubectl apply of {MANIFESTS} failed: {done.stderr.strip()}")
