"""The runbooks' least-privilege identity: the manifests in deploy/rbac/, applied to a cluster with
the operator namespace they are written for replaced by the one in use."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from gpushare.binaries import REPO_ROOT
from gpushare.processes import ComponentError

MANIFESTS = REPO_ROOT / "deploy" / "rbac"
SERVICE_ACCOUNT_NAMESPACE = "gpushare-system"
SERVICE_ACCOUNT = "gpushare-runbook"
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{SERVICE_ACCOUNT_NAMESPACE}:{SERVICE_ACCOUNT}"
# A client certificate cannot name a ServiceAccount: the embedded cluster's runbook certificate has
# this user, bound to the same roles.
RUNBOOK_USER = "gpushare-runbook"
WRITTEN_FOR_NAMESPACE = "gpu-operator"


class RbacError(ComponentError):
    """deploy/rbac could not be read or applied; the message says why."""


def manifests(operator_namespace: str = WRITTEN_FOR_NAMESPACE, directory: Path = MANIFESTS,
              without_namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every object of deploy/rbac/ (not optional/), in file order, the operator namespace replaced;
    none of those in `without_namespaces` (of a component the cluster does not run)."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise RbacError(f"no manifests in {directory}")
    objects = [doc for path in files for doc in yaml.safe_load_all(path.read_text()) if doc]
    for obj in objects:
        metadata = obj.get("metadata") or {}
        if metadata.get("namespace") == WRITTEN_FOR_NAMESPACE:
            metadata["namespace"] = operator_namespace
    return [o for o in objects if (o.get("metadata") or {}).get("namespace") not in without_namespaces]


def apply(kubectl: Path, kubeconfig: Path, operator_namespace: str, without_namespaces: tuple[str, ...] = ()) -> None:
    """Apply deploy/rbac/ (as an administrator) so that the runbook identity works."""
    stream = yaml.safe_dump_all(manifests(operator_namespace, without_namespaces=without_namespaces), sort_keys=False)
    done = subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", "apply", "--server-side", "--filename=-"],
                          input=stream, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise RbacError(f"kubectl apply of {MANIFESTS} failed: {done.stderr.strip()}")
