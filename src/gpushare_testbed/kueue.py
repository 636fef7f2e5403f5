"""Kueue (the release build/versions.env pins, v0.19.2) as a component of the embedded cluster: it
runs out of cluster, like the others.

Configuration choices, each forced by running outside a pod (see the contract, section Kueue):
- webhook server on loopback with our own serving cert: it always starts; with no webhook
  configurations nothing calls it, so Jobs are created suspended with the queue-name label;
- internal cert management off: enabled, it waits for the webhook configurations and the CRDs'
  conversion webhooks to take its CA, which the CRD bases do not have;
- VisibilityOnDemand off: it would serve an aggregated API with certificates of its own;
- with internal cert management off, the metrics server reads /etc/kueue/metrics/certs/tls.{crt,key}
  (hard-coded in cmd/kueue/main.go; in a cluster a mounted Secret). Where that directory does not
  exist, Kueue runs in a private mount namespace in which our certificate is laid over /etc;
- leader election on, in the kueue-system namespace (as the Helm chart does): its Lease is how the
  runbook tells, on any cluster, that a Kueue controller runs;
- its configuration also published as the Helm chart publishes it (charts/kueue/templates/manager/
  manager-config.yaml): ConfigMap kueue-system/kueue-manager-config, key controller_manager_config.yaml,
  labelled app.kubernetes.io/version with the release built, which is what the runbook reads.
Everything else keeps Kueue's defaults, WaitForPodsReady included: since v0.19 on, with a 30 min
timeout (apis/config/v1beta2/defaults.go).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from gpushare_testbed import pki
from gpushare_testbed.processes import ComponentError

NAMESPACE = "kueue-system"
CONFIG_MAP = "kueue-manager-config"  # the Helm chart's name for a release named kueue
CONFIG_KEY = "controller_manager_config.yaml"
LEASE_NAME = "c1f6bfd2.kueue.x-k8s.io"  # Kueue's default leader-election ID
# The team namespaces deploy/rbac is rendered for on the embedded cluster (`gpushare rbac render
# --team-namespace`): the sample inventory's teams (inventories/sim) and the queue features' (team-a, team-b).
TEAM_NAMESPACES = ("team-training", "team-inference", "team-a", "team-b")
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
PORTS = ("kueue-health", "kueue-metrics", "kueue-webhook")
# Lets unshare's mount namespace lay our /etc/kueue over the real /etc, then runs Kueue in it.
_OVERLAY_AND_EXEC = 'mount -t overlay overlay -o "lowerdir=$0:/etc" /etc && exec "$@"'


def configuration(ports: dict[str, int], cert_dir: Path, **extra: Any) -> dict:
    """Kueue's Configuration for an out-of-cluster controller on loopback ports (`extra`: more
    top-level fields, such as a waitForPodsReady section)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(cert_dir)},
        # Longer than Kueue's 15 s default: on a loaded machine a missed renewal would stop it.
        "leaderElection": {"leaderElect": True, "resourceNamespace": NAMESPACE, "resourceName": LEASE_NAME,
                           "leaseDuration": "60s", "renewDeadline": "45s", "retryPeriod": "5s"},
        "internalCertManagement": {"enable": False},
        "featureGates": {"VisibilityOnDemand": False},
        # As in Kueue's shipped configuration (config/components/manager/controller_manager_config.yaml).
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
            "Cohort.kueue.x-k8s.io": 1, "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["batch/job"]},
        **extra,
    }


def prepare(root: Path, pki_dir: Path, ca: pki.KeyPair, ports: dict[str, int], **extra: Any) -> Path:
    """Write the serving certificate where Kueue looks for it and the configuration; returns the latter."""
    cert_dir = root / "etc" / METRICS_CERT_DIR.relative_to("/etc")
    cert_dir.mkdir(parents=True, exist_ok=True)
    pair = pki.ensure_serving_cert(pki_dir, ca, name="kueue", common_name="kueue")
    shutil.copyfile(pair.cert, cert_dir / "tls.crt")
    shutil.copyfile(pair.key, cert_dir / "tls.key")
    (cert_dir / "tls.key").chmod(0o600)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(configuration(ports, cert_dir, **extra), sort_keys=False))
    return config


def built_version(bin_dir: Path) -> str:
    """The release of the Kueue binary in `bin_dir`, from the build.json scripts/build-binaries.sh
    wrote beside it."""
    return json.loads(((bin_dir / "kueue").resolve().parent / "build.json").read_text())["version"]


def publish(kubectl: Path, kubeconfig: Path, bin_dir: Path, config: Path) -> None:
    """The configuration Kueue runs with, as the Helm chart's ConfigMap (server-side apply)."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": CONFIG_MAP, "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/version": built_version(bin_dir)}},
        "data": {CONFIG_KEY: config.read_text()}}
    done = subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", "apply", "--server-side", "--force-conflicts",
                           "--field-manager=gpushare-sim", "--filename=-"],
                          input=json.dumps(config_map), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ComponentError(f"kueue: kubectl apply of ConfigMap {NAMESPACE}/{CONFIG_MAP} failed: {done.stderr.strip()}")


def argv(kueue: Path, kubeconfig: Path, config: Path) -> list[str]:
    """The command line: Kueue itself, or inside a mount namespace that provides its metrics certs."""
    command = [str(kueue), f"--kubeconfig={kubeconfig}", f"--config={config}"]
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return command
    etc = config.parent / "etc"
    unshare = shutil.which("unshare")
    namespace = [unshare or "unshare", "--user", "--map-root-user", "--mount"]
    if unshare is None or subprocess.run([*namespace, "true"], capture_output=True, check=False).returncode != 0:
        raise ComponentError(
            f"kueue: Kueue reads its metrics certificate from {METRICS_CERT_DIR} (fixed in "
            "Kueue's cmd/kueue/main.go) and this machine allows no private mount namespace (unshare --user --mount) to provide "
            f"it. Put a tls.crt and tls.key there (e.g. sudo install -D -m 0644 {etc}/kueue/metrics/certs/tls.crt "
            f"{METRICS_CERT_DIR}/tls.crt, same for tls.key), or start without Kueue: gpushare sim up --without kueue"
        )
    if ":" in str(etc) or "," in str(etc):
        raise ComponentError(f"kueue: the state directory {config.parent.parent} must not contain ':' or ','")
    return [*namespace, "sh", "-c", _OVERLAY_AND_EXEC, str(etc), *command]


def install(kubectl: Path, kubeconfig: Path, bin_dir: Path, root: Path, timeout_s: int = 60) -> None:
    """Kueue's namespace and its CRDs of the version built (copied from its Go module by
    scripts/build-binaries.sh): server-side apply, as the workloads CRD is too large for a client-side
    one, then wait until they are served."""
    crds = sorted((bin_dir / "kueue-crds").glob("*.yaml"))
    if not crds:
        raise ComponentError(f"kueue: no CRDs in {bin_dir / 'kueue-crds'}; run `make binaries`")
    namespace = root / "namespace.yaml"
    namespace.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
    crd_args = [f"--filename={f}" for f in crds]
    for step in (["apply", "--server-side", "--force-conflicts", f"--filename={namespace}", *crd_args],
                 ["wait", "--for=condition=Established", f"--timeout={timeout_s}s", *crd_args]):
        done = subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", *step],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ComponentError(f"kueue: kubectl {step[0]} of its namespace and CRDs failed: {done.stderr.strip()}")
