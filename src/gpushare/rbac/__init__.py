"""The runbooks' least-privilege identity: the manifests in deploy/rbac/, rendered for the names in
use (the operator namespace, the time-slicing ConfigMap, the pool label key, the pool taint, the team namespaces)
and applied to a cluster. `gpushare rbac render` prints them; `gpushare sim up` applies the same rendering."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpushare.collection_root import COLLECTION_ROOT
from gpushare.polling import WaitTimeout, wait_for
from gpushare.runbook.inputs import DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, is_system_namespace

MANIFESTS = COLLECTION_ROOT / "deploy" / "rbac"
SERVICE_ACCOUNT_NAMESPACE = "gpushare-system"
SERVICE_ACCOUNT = "gpushare-runbook"
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{SERVICE_ACCOUNT_NAMESPACE}:{SERVICE_ACCOUNT}"
# A client certificate cannot name a ServiceAccount: the embedded cluster's runbook certificate has
# this user, bound to the same roles.
RUNBOOK_USER = "gpushare-runbook"
# The names deploy/rbac/ is written for: the runbooks' defaults.
WRITTEN_FOR_NAMESPACE = "gpu-operator"
WRITTEN_FOR_CONFIGMAP = "time-slicing-config"  # timeslicing_configmap_name
WRITTEN_FOR_POOL_LABEL_KEY = "gpu-mode"  # timeslicing_pool_label_key
WRITTEN_FOR_POOL_TAINT_KEY = "nvidia.com/gpu"  # timeslicing_pool_taint_key
WRITTEN_FOR_POOL_TAINT_VALUE = "shared"  # timeslicing_pool_taint_value (the effect is always NoSchedule)
# The admission policies' parameters (deploy/rbac/55-write-model.yaml): the names and values above.
WRITE_MODEL = "gpushare-write-model"
CONFIGMAPS_POLICY = "gpushare-runbook-configmaps"


class RbacError(RuntimeError):
    """deploy/rbac could not be read, rendered or applied; the message says why."""


@dataclass(frozen=True)
class Names:
    """The names the runbooks use that deploy/rbac/ names: the inputs gpu_operator_namespace,
    timeslicing_configmap_name and timeslicing_pool_label_key, the team namespaces (those of
    queue_backfill_teams) where the queue-backfill runbook may create a Namespace and a LocalQueue,
    and the pool taint (timeslicing_pool_taint_key=timeslicing_pool_taint_value:NoSchedule)."""

    operator_namespace: str = WRITTEN_FOR_NAMESPACE
    timeslicing_configmap: str = WRITTEN_FOR_CONFIGMAP
    pool_label_key: str = WRITTEN_FOR_POOL_LABEL_KEY
    # spec.devicePlugin.config.name before any gpushare run: the other config a rollback may restore
    original_device_plugin_config: str = ""
    # the namespaces the queue backfill may create and put LocalQueues in (gpushare rbac render --team-namespace)
    team_namespaces: tuple[str, ...] = ()
    pool_taint_key: str = WRITTEN_FOR_POOL_TAINT_KEY
    pool_taint_value: str = WRITTEN_FOR_POOL_TAINT_VALUE

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
        if self.original_device_plugin_config and not DNS_SUBDOMAIN.fullmatch(self.original_device_plugin_config):
            problems.append(f"original device-plugin config {self.original_device_plugin_config!r} is not a valid "
                            "ConfigMap name (a DNS-1123 subdomain)")
        if not LABEL_KEY.fullmatch(self.pool_taint_key):
            problems.append(f"pool taint key {self.pool_taint_key!r} is not a valid taint key (a label key)")
        if not LABEL_VALUE.fullmatch(self.pool_taint_value):
            problems.append(f"pool taint value {self.pool_taint_value!r} is not a valid taint value (a label value: at "
                            "most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)")
        for namespace in self.team_namespaces:
            if not DNS_LABEL.fullmatch(namespace):
                problems.append(f"team namespace {namespace!r} is not a valid namespace name (a DNS-1123 label)")
            elif is_system_namespace(namespace, (self.operator_namespace,)):
                problems.append(f"team namespace {namespace!r} is a system namespace (kube-*, default, the operator "
                                "namespace, gpushare-system, kueue-system): the runbook identity may never write there")
        return problems

    def write_model(self) -> dict[str, str]:
        """The data of the admission policies' parameter ConfigMap."""
        return {"operator-namespace": self.operator_namespace, "timeslicing-configmap": self.timeslicing_configmap,
                "original-device-plugin-config": self.original_device_plugin_config,
                "pool-label-key": self.pool_label_key, "team-namespaces": ",".join(self.team_namespaces),
                "pool-taint-key": self.pool_taint_key, "pool-taint-value": self.pool_taint_value}

    def options(self, with_namespace: bool = False) -> str:
        """The `gpushare rbac render` options that give these names (the defaults left out, but for
        the operator namespace `with_namespace`)."""
        given = [("--operator-namespace", self.operator_namespace, WRITTEN_FOR_NAMESPACE),
                 ("--timeslicing-configmap", self.timeslicing_configmap, WRITTEN_FOR_CONFIGMAP),
                 ("--pool-label-key", self.pool_label_key, WRITTEN_FOR_POOL_LABEL_KEY),
                 ("--pool-taint-key", self.pool_taint_key, WRITTEN_FOR_POOL_TAINT_KEY),
                 ("--pool-taint-value", self.pool_taint_value, WRITTEN_FOR_POOL_TAINT_VALUE),
                 ("--original-device-plugin-config", self.original_device_plugin_config, "")]
        return " ".join([f"{option} {value}" for option, value, default in given
                         if value != default or with_namespace and option == "--operator-namespace"]
                        + [f"--team-namespace {namespace}" for namespace in self.team_namespaces])


def _render(obj: dict[str, Any], names: Names) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    if metadata.get("namespace") == WRITTEN_FOR_NAMESPACE:
        metadata["namespace"] = names.operator_namespace
    if obj.get("kind") in ("Role", "ClusterRole"):
        for rule in obj.get("rules") or []:
            if "configmaps" in (rule.get("resources") or []) and rule.get("resourceNames"):
                rule["resourceNames"] = [names.timeslicing_configmap if n == WRITTEN_FOR_CONFIGMAP else n
                                         for n in rule["resourceNames"]]
    elif obj.get("kind") == "ConfigMap" and metadata.get("name") == WRITE_MODEL:
        obj["data"] = names.write_model()
    return obj


def manifests(operator_namespace: str = WRITTEN_FOR_NAMESPACE, directory: Path = MANIFESTS,
              without_namespaces: tuple[str, ...] = (), names: Names | None = None) -> list[dict[str, Any]]:
    """Every object of deploy/rbac/ (not optional/), in file order, rendered for `names` (by default
    the runbooks' defaults with `operator_namespace`): the operator namespace, the time-slicing
    ConfigMap in the RBAC rules that name it, every name in the admission policies' parameters (the
    write model); none of those in `without_namespaces` (of a component the cluster
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
    wait_in_force(kubectl, kubeconfig)


def wait_in_force(kubectl: Path, kubeconfig: Path, timeout_s: float = 60) -> None:
    """Wait until the API server enforces the admission policies just applied (it reads them a moment
    later): a dry-run write of the write model, as the runbook identity, is refused by its policy."""
    probe = [str(kubectl), f"--kubeconfig={kubeconfig}", f"--as={RUNBOOK_USER}", f"--namespace={SERVICE_ACCOUNT_NAMESPACE}",
             "patch", "configmap", WRITE_MODEL, "--dry-run=server", "--patch", '{"data": {"probe": "x"}}']

    def refused() -> bool:
        done = subprocess.run(probe, capture_output=True, text=True, check=False, timeout=30)
        return done.returncode != 0 and CONFIGMAPS_POLICY in done.stderr

    try:
        wait_for(refused, timeout_s, "the admission policies of deploy/rbac to be in force", interval_s=0.2)
    except WaitTimeout as err:
        raise RbacError(str(err)) from None
