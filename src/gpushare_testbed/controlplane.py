"""The embedded cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, the
GPU Operator simulator and Kueue on free loopback ports, with state under one directory."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import random
import socket
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from gpushare import rbac
from gpushare_testbed import pki, processes
from gpushare_testbed.binaries import binary_dir
from gpushare_testbed.fleet import Fleet
from gpushare_testbed import kueue as kueue_embedded
from gpushare_testbed.processes import Component, ComponentError, alive, foreign, start, stop_all, wait_ready
from gpushare_testbed.simulator.clusterpolicy import NEWEST_RELEASE

# The embedded cluster's simulator: a kubelet volume refresh long enough that labelling a node right
# after adding a key to the ConfigMap (without restarting its pods) shows, short enough for tests.
EMBEDDED_CONFIGMAP_REFRESH_S = 15
EMBEDDED_MIG_REBOOT_S = 2
EMBEDDED_DRA_WIPE_S = 5  # the kubelet wipes a gone DRA plugin's slices after 30 s; the suite waits less
# Start order; `down` stops in reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "gpu-operator-sim",
              "dcgm-exporter", "kueue")
# `gpushare sim up --without NAME`; without the simulator, a cluster to run it against separately
# (`gpushare sim gpu-operator --kubeconfig`), as an "external" cluster would have its own operator.
OPTIONAL_COMPONENTS = ("gpu-operator-sim", "kueue")
# Started on demand (`gpushare sim prometheus`), stopped by `down`.
ON_DEMAND_COMPONENTS = ("prometheus",)
# Client identities: file stem -> (user, group). Distinct users keep the audit log readable.
IDENTITIES = {
    "admin": ("gpushare-admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kwok": ("system:kwok", "system:masters"),
    "gpu-operator-sim": ("system:gpushare-gpu-operator-sim", "system:masters"),
    # reads the nodes and DaemonSets only (cluster_bootstrap.grant_readers), never an administrator
    "dcgm-exporter": ("system:gpushare-dcgm-exporter", None),
    "kueue": ("system:kueue", "system:masters"),
    # The runbooks' identity: no group, only what deploy/rbac binds to the user gpushare-runbook.
    "runbook": (rbac.RUNBOOK_USER, None),
}
# The components `gpushare sim up --feature-gates` switches gates on (`--component-feature-gates` one of them).
GATED_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# kube-controller-manager's controllers: all on by default but those for what the embedded cluster
# has none of (volumes, Services, autoscaling, cloud) and the TTL controller, which on a large
# fleet re-annotates every node (node.alpha.kubernetes.io/ttl: 15 s past 100 nodes, 30 s past 500)
# for kubelets, which KWOK's are not, to read.
CONTROLLERS = ("*", "-ttl-controller", "-persistentvolume-attach-detach-controller", "-persistentvolume-binder-controller",
               "-persistentvolume-expander-controller", "-persistentvolume-protection-controller",
               "-persistentvolumeclaim-protection-controller", "-ephemeral-volume-controller",
               "-volumeattributesclass-protection-controller", "-endpoints-controller", "-endpointslice-controller",
               "-endpointslice-mirroring-controller", "-horizontal-pod-autoscaler-controller")
KWOK_NODE_IP = "10.0.0.1"
# KWOK renews each node Lease every quarter of its duration: 80 s (the kubelet's 40 s doubled) halves
# the renewals, the steady write load of a large fleet (500 nodes: 25 a second); the node lifecycle
# controller's grace period matches it, four renewals missed before a node is NotReady.
NODE_LEASE_S = 80
# The API server's client certificate for etcd (etcd takes no other client).
ETCD_CLIENT = "apiserver-etcd-client"
# Every request of the runbook identity (reads and denials too: the evidence deploy/rbac is derived
# from); of the others, only the writes.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "users": [rbac.RUNBOOK_USER, rbac.SERVICE_ACCOUNT_USER]},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        {"level": "None"},
    ],
}


@dataclass(frozen=True)
class StateDir:
    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    @property
    def info(self) -> Path:
        return self.root / "cluster.json"

    def component_kubeconfig(self, name: str) -> Path:
        return self.root / "kubeconfigs" / f"{name}.yaml"

    def pid_file(self, name: str) -> Path:
        return self.root / "pids" / f"{name}.pid"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def pid_files(self) -> list[Path]:
        return [self.pid_file(name) for name in COMPONENTS]

    @property
    def marker(self) -> Path:
        """Written by `up` before anything else, naming this directory: `down` (and `up` over an old
        cluster) removes only a directory whose marker names it."""
        return self.root / MARKER

    def _marker_text(self) -> str:
        return f"{MARKER_TEXT} {self.root.resolve()};"

    def ours(self) -> bool:
        """The marker is there, a regular file (not a link) whose text names this directory as `mark` wrote it."""
        try:
            return stat.S_ISREG(self.marker.lstat().st_mode) and self.marker.read_text().startswith(self._marker_text())
        except (OSError, UnicodeDecodeError):
            return False

    def mark(self) -> None:
        self.marker.write_text(f"{self._marker_text()} `gpushare sim down` removes this directory.\n")

    def not_ours(self) -> str:
        """Why `up` did not create this directory ("" when it did, or when it is absent or empty:
        there is nothing to lose)."""
        if not self.root.is_symlink() and not self.root.exists():
            return ""
        if self.root.is_symlink() or not self.root.is_dir():
            return "it is not a directory"
        if not any(self.root.iterdir()):
            return ""
        if not self.marker.exists():
            return f"it has no {MARKER} file"
        if not self.ours():
            return f"its {MARKER} file was not written by `up` for this directory"
        return ""

    def check_ours(self) -> None:
        """Refuse a directory `up` did not create."""
        problem = self.not_ours()
        if problem:
            raise NotAStateDir(
                f"{self.root} is not a state directory of `gpushare sim up` ({problem}): refusing to "
                "stop or delete anything in it. Name the directory `up` used (--state-dir, $GPUSHARE_STATE_DIR), "
                "or remove this one yourself.")


class NotAStateDir(ComponentError):
    """A --state-dir that `gpushare sim up` did not create; the message says why nothing was done."""


MARKER = ".gpushare-sim-state"
MARKER_TEXT = "gpushare sim up created"
# Listening ports come from below Linux's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
# default): a port the kernel hands out by bind(0) may be taken as the source port of an outgoing
# connection before the component binds it ("address already in use"; seen under make test's load).
LISTEN_PORTS = range(20000, 32768)


def free_port() -> int:
    for port in random.sample(LISTEN_PORTS, 64):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_busy(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def private_dir(path: Path) -> Path:
    """A directory only its owner can enter: where keys and kubeconfigs live."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_kubeconfig(path: Path, server: str, ca: Path, client: pki.KeyPair, user: str) -> None:
    private_dir(path.parent)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "gpushare", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}],
        "contexts": [{"name": "gpushare", "context": {"cluster": "gpushare", "user": user}}],
        "current-context": "gpushare",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:  # noqa: S310 - loopback URL we built
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _client_context(state: StateDir, name: str = "admin") -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(state.pki / "ca.crt"))
    context.load_cert_chain(str(state.pki / f"{name}.crt"), str(state.pki / f"{name}.key"))
    return context


def _insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def fleet_digest(fleet: Fleet) -> str:
    """Identifies a fleet by its content, wherever it was read from."""
    return hashlib.sha256(json.dumps(dataclasses.asdict(fleet), sort_keys=True).encode()).hexdigest()[:16]


def recorded_info(state: StateDir) -> dict:
    """What `up` recorded in cluster.json ({} when nothing was recorded)."""
    try:
        return json.loads(state.info.read_text())
    except (OSError, ValueError):
        return {}


def started_components(state: StateDir) -> tuple[str, ...]:
    """The components cluster.json records (all of them unless it names every required one and no other)."""
    recorded = recorded_info(state).get("components")
    if not isinstance(recorded, list) or not set(recorded) <= set(COMPONENTS):
        return COMPONENTS
    started = tuple(name for name in COMPONENTS if name in recorded)
    required = {name for name in COMPONENTS if name not in OPTIONAL_COMPONENTS}
    return started if required <= set(started) else COMPONENTS


def running(state: StateDir) -> bool:
    return (not state.not_ours() and state.info.exists()
            and all(alive(state.pid_file(name)) for name in started_components(state)))


class Launcher:
    """Brings the components up one by one; on any failure stops what it started."""

    def __init__(self, state: StateDir, fleet: Fleet, operator_namespace: str, apiserver_port: int | None,
                 components: tuple[str, ...] = COMPONENTS, fleet_source: str = "default",
                 feature_gates: dict[str, str] | None = None, operator_release: str = NEWEST_RELEASE,
                 dra_driver_gates: str = "") -> None:
        self.state = state
        self.dra_driver_gates = dra_driver_gates  # the simulated DRA driver chart's featureGates ("": none)
        self.operator_release = operator_release
        self.feature_gates = feature_gates or {}
        self.fleet = fleet
        self.components = components
        self.fleet_source = fleet_source
        self.operator_namespace = operator_namespace
        self.apiserver_port = apiserver_port
        self.started: list[Path] = []
        self.ports: dict[str, int] = {}

    def progress(self, message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    def run(self, name: str, argv: list[str], probe: Callable[[], bool], timeout_s: float = 60.0) -> None:
        component = Component(name, tuple(argv), self.state.log(name), self.state.pid_file(name))
        began = time.monotonic()
        start(component)
        self.started.append(component.pid_file)
        wait_ready(component, probe, timeout_s)
        self.progress(f"{name} ready ({time.monotonic() - began:.1f}s)")

    def up(self) -> dict:
        try:
            return self._up()
        except BaseException:
            stop_all(self.started)
            raise

    def _prepare(self) -> dict[str, pki.KeyPair]:
        private_dir(self.state.root)
        self.state.mark()
        ca = pki.ensure_ca(private_dir(self.state.pki))
        pki.ensure_serving_cert(self.state.pki, ca)
        # etcd serves TLS and takes client certificates only (its member cert is its peer cert too):
        # no local user reaches the data behind RBAC and the audit log.
        pki.ensure_serving_cert(self.state.pki, ca, "etcd", "etcd", client=True)
        pki.ensure_client_cert(self.state.pki, ca, ETCD_CLIENT, "kube-apiserver-etcd-client", None)
        # The scheduler's and controller-manager's /metrics, served under the cluster's CA (not a
        # self-signed certificate), so a runbook reads them as it reads the API server.
        for name in ("kube-controller-manager", "kube-scheduler"):
            pki.ensure_serving_cert(self.state.pki, ca, f"{name}-serving", name)
        pki.ensure_service_account_key(self.state.pki)
        clients = {
            name: pki.ensure_client_cert(self.state.pki, ca, name, user, group)
            for name, (user, group) in IDENTITIES.items()
        }
        (self.state.root / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        stages = resources.files("gpushare_testbed") / "data" / "kwok-stages.yaml"
        (self.state.root / "kwok-stages.yaml").write_text(stages.read_text())
        return clients

    def _ports(self) -> None:
        if self.apiserver_port is not None and port_busy(self.apiserver_port):
            raise ComponentError(
                f"port {self.apiserver_port} on 127.0.0.1 is already in use; "
                "pick another with --apiserver-port or leave it out to use a free port"
            )
        self.ports = {
            "etcd-client": free_port(),
            "etcd-peer": free_port(),
            "kube-apiserver": self.apiserver_port or free_port(),
            "kube-controller-manager": free_port(),
            "kube-scheduler": free_port(),
            "kwok": free_port(),
            "dcgm-exporter": free_port(),
        }
        if "kueue" in self.components:
            self.ports.update({name: free_port() for name in kueue_embedded.PORTS})

    def _up(self) -> dict:
        bins = binary_dir(with_kueue="kueue" in self.components)
        clients = self._prepare()
        self._ports()
        state, ports, pki_dir = self.state, self.ports, self.state.pki
        server = f"https://127.0.0.1:{ports['kube-apiserver']}"
        for name, pair in clients.items():
            target = state.kubeconfig if name == "admin" else state.component_kubeconfig(name)
            write_kubeconfig(target, server, pki_dir / "ca.crt", pair, IDENTITIES[name][0])
        etcd_url = f"https://127.0.0.1:{ports['etcd-client']}"
        peer_url = f"https://127.0.0.1:{ports['etcd-peer']}"
        etcd_pair = (pki_dir / "etcd.crt", pki_dir / "etcd.key")
        self.run("etcd", [
            str(bins / "etcd"), "--name=default", f"--data-dir={state.root / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}", "--unsafe-no-fsync", "--log-level=warn",
            f"--cert-file={etcd_pair[0]}", f"--key-file={etcd_pair[1]}", "--client-cert-auth=true",
            f"--trusted-ca-file={pki_dir / 'ca.crt'}",
            f"--peer-cert-file={etcd_pair[0]}", f"--peer-key-file={etcd_pair[1]}", "--peer-client-cert-auth=true",
            f"--peer-trusted-ca-file={pki_dir / 'ca.crt'}",
        ], lambda: _https_ok(f"{etcd_url}/health", _client_context(state, ETCD_CLIENT)))
        client_context = _client_context(state)
        self.run("kube-apiserver", [
            str(bins / "kube-apiserver"), f"--etcd-servers={etcd_url}", f"--etcd-cafile={pki_dir / 'ca.crt'}",
            f"--etcd-certfile={pki_dir / f'{ETCD_CLIENT}.crt'}", f"--etcd-keyfile={pki_dir / f'{ETCD_CLIENT}.key'}",
            "--anonymous-auth=false",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={pki_dir / 'apiserver.crt'}", f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
            f"--client-ca-file={pki_dir / 'ca.crt'}", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki_dir / 'service-account.pub'}",
            f"--service-account-signing-key-file={pki_dir / 'service-account.key'}",
            f"--audit-policy-file={state.root / 'audit-policy.yaml'}", f"--audit-log-path={state.audit_log}",
            "--audit-log-maxsize=200", "--profiling=false", "--allow-privileged=true",
            *self._gates("kube-apiserver"),
        ], lambda: _https_ok(f"{server}/readyz", client_context), timeout_s=90)
        kueue_crds = self._install_kueue_crds(bins) if "kueue" in self.components else None
        for name in ("kube-controller-manager", "kube-scheduler"):
            kubeconfig = state.component_kubeconfig(name)
            extra = (
                [f"--service-account-private-key-file={pki_dir / 'service-account.key'}",
                 f"--root-ca-file={pki_dir / 'ca.crt'}", "--use-service-account-credentials=true",
                 f"--node-monitor-grace-period={NODE_LEASE_S}s", "--kube-api-qps=300", "--kube-api-burst=500",
                 f"--controllers={','.join(CONTROLLERS)}"]
                if name == "kube-controller-manager" else ["--kube-api-qps=300", "--kube-api-burst=500"]
            )
            port = ports[name]
            self.run(name, [
                str(bins / name), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
                f"--secure-port={port}", "--leader-elect=false",
                f"--tls-cert-file={pki_dir / f'{name}-serving.crt'}",
                f"--tls-private-key-file={pki_dir / f'{name}-serving.key'}",
                *extra, *self._gates(name),
            ], lambda port=port: _https_ok(f"https://127.0.0.1:{port}/healthz", _insecure_context()))
        from gpushare_testbed import cluster_bootstrap  # noqa: PLC0415 - needs the API server; kept out of import time

        cluster_bootstrap.register_nodes(state.kubeconfig, self.fleet, KWOK_NODE_IP, _kwok_version(bins / "kwok"))
        self.run("kwok", [
            str(bins / "kwok"), f"--kubeconfig={state.component_kubeconfig('kwok')}",
            "--manage-all-nodes=true", f"--config={state.root / 'kwok-stages.yaml'}", f"--node-lease-duration-seconds={NODE_LEASE_S}",
            f"--server-address=127.0.0.1:{ports['kwok']}", f"--node-ip={KWOK_NODE_IP}", "--cidr=10.244.0.0/16",
        ], lambda: _http_ok(f"http://127.0.0.1:{ports['kwok']}/healthz"))
        # The nodes join first, then the GPU Operator is installed (and 7 operand pods per GPU node start).
        cluster_bootstrap.wait_nodes_ready(state.kubeconfig, self.fleet)
        if "gpu-operator-sim" in self.components:
            self.run("gpu-operator-sim", [
                sys.executable, "-m", "gpushare", "sim", "gpu-operator",
                f"--kubeconfig={state.component_kubeconfig('gpu-operator-sim')}",
                f"--operator-namespace={self.operator_namespace}",
                f"--ready-file={state.root / 'gpu-operator-sim.ready'}",
                f"--configmap-refresh-seconds={EMBEDDED_CONFIGMAP_REFRESH_S}",
                f"--mig-reboot-seconds={EMBEDDED_MIG_REBOOT_S}",
                f"--dra-wipe-seconds={EMBEDDED_DRA_WIPE_S}", f"--dra-driver-gates={self.dra_driver_gates}",
                f"--nvidia-judge={bins / 'nvidia-judge'}", f"--operator-version={self.operator_release}",
            ], lambda: (state.root / "gpu-operator-sim.ready").exists())
        cluster_bootstrap.grant_readers(state.kubeconfig, [IDENTITIES["dcgm-exporter"][0]])
        self.run("dcgm-exporter", [
            sys.executable, "-m", "gpushare", "sim", "dcgm-exporter",
            f"--kubeconfig={state.component_kubeconfig('dcgm-exporter')}", f"--port={ports['dcgm-exporter']}",
            f"--ready-file={state.root / 'dcgm-exporter.json'}",
        ], lambda: (state.root / "dcgm-exporter.json").exists())
        if kueue_crds is not None:
            self._start_kueue(bins, kueue_crds)
        if "gpu-operator-sim" in self.components:
            cluster_bootstrap.wait_gpu_operator(state.kubeconfig, self.operator_namespace)
            # the operator namespace exists once the operator is installed; without it, whoever runs
            # one applies deploy/rbac like on any cluster (scripts/external_cluster.py)
            began = time.monotonic()
            try:
                rbac.apply(bins / "kubectl", state.kubeconfig, self.operator_namespace,
                           () if "kueue" in self.components else (kueue_embedded.NAMESPACE,),
                           rbac.Names(self.operator_namespace, team_namespaces=kueue_embedded.TEAM_NAMESPACES))
            except rbac.RbacError as err:
                raise ComponentError(str(err)) from err
            self.progress(f"deploy/rbac applied ({time.monotonic() - began:.1f}s)")
        info = {"server": server, "ports": ports, "bin_dir": str(bins), "operator_namespace": self.operator_namespace,
                "components": list(self.components), "feature_gates": self.feature_gates,
                "operator_version": self.operator_release, "dra_driver_gates": self.dra_driver_gates,
                "fleet": {"source": self.fleet_source, "digest": fleet_digest(self.fleet)}}
        state.info.write_text(json.dumps(info, indent=2))
        return info

    def _gates(self, name: str) -> list[str]:
        gates = self.feature_gates.get(name)
        return [f"--feature-gates={gates}"] if gates else []

    def _install_kueue_crds(self, bins: Path) -> Future:
        """Kueue's CRDs take the API server seconds to establish: applied while the others start."""
        root = self.state.root / "kueue"
        root.mkdir(parents=True, exist_ok=True)
        background = ThreadPoolExecutor(max_workers=1)
        installing = background.submit(kueue_embedded.install, bins / "kubectl", self.state.kubeconfig, bins, root)
        background.shutdown(wait=False)
        return installing

    def _start_kueue(self, bins: Path, crds: Future) -> None:
        began = time.monotonic()
        crds.result()
        self.progress(f"kueue CRDs established (waited {time.monotonic() - began:.1f}s)")
        root = self.state.root / "kueue"
        config = kueue_embedded.prepare(root, self.state.pki, pki.ensure_ca(self.state.pki), self.ports)
        kueue_embedded.publish(bins / "kubectl", self.state.kubeconfig, bins, config)
        health = self.ports["kueue-health"]
        self.run("kueue", kueue_embedded.argv(bins / "kueue", self.state.component_kubeconfig("kueue"), config),
                 lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"))


def feature_gates(cluster: str, per_component: list[str]) -> dict[str, str]:
    """`--feature-gates` of each gated component: `cluster` (`Gate=true,...`) for all three, then each
    `COMPONENT:Gate=bool,...` of `per_component` for that one (a gate named in both takes the latter)."""
    def parsed(text: str, what: str) -> dict[str, str]:
        gates = {}
        for item in filter(None, text.split(",")):
            gate, _, value = item.partition("=")
            if not gate or value not in ("true", "false"):
                raise ValueError(f"{what}: {item!r} is not GATE=true or GATE=false")
            gates[gate] = value
        return gates

    common = parsed(cluster, "--feature-gates")
    gates = {name: dict(common) for name in GATED_COMPONENTS}
    for entry in per_component:
        name, _, text = entry.partition(":")
        if name not in GATED_COMPONENTS:
            raise ValueError(f"--component-feature-gates: {entry!r} names no component of "
                             f"{', '.join(GATED_COMPONENTS)} (COMPONENT:GATE=true,...)")
        gates[name].update(parsed(text, f"--component-feature-gates {name}"))
    return {name: ",".join(f"{gate}={value}" for gate, value in sorted(values.items()))
            for name, values in gates.items() if values}


def _kwok_version(kwok: Path) -> str:
    """The version KWOK writes into its nodes' nodeInfo (`kwok version v0.8.0 ...` -> 0.8.0)."""
    out = subprocess.run([str(kwok), "--version"], capture_output=True, text=True, check=True).stdout.split()
    return out[2].removeprefix("v")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback URL we built
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


# What `gpushare sim restart` restarts: the faults of a change window the tests inject.
def compact_history(state: StateDir) -> int:
    """Compact etcd's history up to its current revision, as the API server does every five minutes
    (--etcd-compaction-interval): a watch from an older resourceVersion then gets 410 Gone. Returns
    the revision compacted to."""
    url, context = f"https://127.0.0.1:{recorded_info(state)['ports']['etcd-client']}", _client_context(state, ETCD_CLIENT)

    def post(path: str, body: dict) -> dict:
        request = urllib.request.Request(f"{url}{path}", json.dumps(body).encode(), method="POST")  # noqa: S310 - loopback URL we built
        with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310 - loopback URL we built
            return json.loads(response.read())

    revision = int(post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])  # any key: the header says where etcd is
    post("/v3/kv/compaction", {"revision": revision, "physical": True})
    return revision


RESTARTABLE = ("etcd", "kube-apiserver")


def restart(state: StateDir, name: str, timeout_s: float = 60.0) -> float:
    """Restart one control-plane component with its command line; wait until the API server is
    ready again (which needs etcd). Returns the seconds the API was not ready."""
    began = time.monotonic()
    component = processes.restart(name, state.pid_file(name), state.log(name))
    server = recorded_info(state)["server"]
    context = _client_context(state)
    wait_ready(component, lambda: _https_ok(f"{server}/readyz", context), timeout_s)
    return time.monotonic() - began


def down(state: StateDir) -> tuple[list[str], list[str]]:
    """Stop what `up` started and remove its directory: (components stopped, processes left alone
    because they are not ours, each with why). NotAStateDir (nothing touched) for another directory."""
    state.check_ours()
    pid_files = [*state.pid_files(), *map(state.pid_file, ON_DEMAND_COMPONENTS)]
    left_alone = [f"{pid_file.stem}: {why}" for pid_file in pid_files if (why := foreign(pid_file))]
    stopped = stop_all(pid_files)
    if state.root.exists():
        shutil.rmtree(state.root)
    return stopped, left_alone
