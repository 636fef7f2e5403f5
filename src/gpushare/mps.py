"""MPS sharing as the device plugin's MPS control daemon applies it, with no I/O.

With `sharing.mps` the plugin's `nvidia-device-plugin-mps-control-daemon` starts one MPS server per
shared resource and gives every share of a card (k8s-device-plugin cmd/mps-control-daemon/mps):

- a default pinned device memory limit of the card's total memory / replicas, in whole MiB
  (daemon.go perDevicePinnedDeviceMemoryLimits: bytes / replicas / 1024 / 1024, written `<n>M`);
- a default active thread percentage of 100 / replicas, an integer (daemon.go activeThreadPercentage);
- at most 48 clients per server on Volta and newer (device.go assertReplicas, maxClients).

MIG devices are skipped (manager.go: "MPS sharing is not supported for MIG devices"), so a node whose
cards are MIG-enabled runs no MPS server and GFD does not label it `nvidia.com/mps.capable=true`; the
device plugin, which waits for the daemon before it serves (plugin server.go Start), serves nothing.

A per-node MPS config (node label `nvidia.com/device-plugin.config` naming a key that is not the
config's default) reaches the daemon only if its pod starts on that key or its config-manager sidecar
can signal it (gpushare.model.releases): from plugin v0.18.2 init starts it on the default, and the
sidecar of the operator's daemon never finds it (PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon against
argv[0] `mps-control-daemon`, gpu-operator assets/state-mps-control-daemon/0400_daemonset.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpushare.model import releases
from gpushare.model.operands import MPS, OperandPod

MAX_CLIENTS = 48  # device.go maxClients, Volta and newer (every product gpushare models)
# The daemon's words when its config shares nothing with MPS (cmd/mps-control-daemon/main.go startDaemons).
NOT_CONFIGURED = "No devices are configured for MPS sharing; Waiting indefinitely."
DAEMON_CONTAINER, SIDECAR = "mps-control-daemon-ctr", "config-manager"
# The sidecar's PROCESS_TO_SIGNAL in the daemon's DaemonSet asset of every operator release v24.3-v26.7.
ASSET_PROCESS_TO_SIGNAL = "/usr/bin/mps-control-daemon"
# The two ways MPS works where a per-node config cannot reach the daemon.
WHAT_WORKS = ("MPS on every GPU node at once (-e timeslicing_scope=cluster -e timeslicing_confirm_cluster_scope=true: "
              "the MPS key becomes the default, which the daemon starts on), or an operator whose device plugin "
              "signals its daemon (plugin v0.18.1 or earlier, as GPU Operator v25.10 ships, or a release with "
              "NVIDIA/k8s-device-plugin PR #1827)")
MIG_UNSUPPORTED = "MPS sharing is not supported for MIG devices"
# validateFlags in the device plugin's main.go: it exits with this under MIG_STRATEGY=mixed.
MIXED_UNSUPPORTED = "using --mig-strategy=mixed is not supported with MPS"


@dataclass(frozen=True)
class ShareLimits:
    """What each MPS share of one card gets."""

    replicas: int
    pinned_memory_mib: int  # set_default_device_pinned_mem_limit <index> <n>M
    active_thread_percentage: int  # set_default_active_thread_percentage <n>

    @property
    def pinned_memory_gib(self) -> float:
        return self.pinned_memory_mib / 1024


def replicas_problem(replicas: int) -> str | None:
    """The daemon's refusal of this many replicas per card (manager.go Daemons), None when it accepts."""
    if replicas > MAX_CLIENTS:
        return (f"invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
                f"{replicas} > {MAX_CLIENTS}")
    return None


def share_limits(memory_mib: int, replicas: int) -> ShareLimits:
    """The limits the daemon sets for each of `replicas` shares of a card with `memory_mib` MiB."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    pinned = memory_mib * 1024 * 1024 // replicas // 1024 // 1024
    return ShareLimits(replicas, pinned, 100 // replicas)


def describe(product: str, memory_mib: int, replicas: int) -> str:
    """e.g. "4 shares of NVIDIA-H100-80GB-HBM3: 19.9 GiB pinned memory and 25% of SMs each"."""
    limits = share_limits(memory_mib, replicas)
    return (f"{replicas} shares of {product}: {limits.pinned_memory_gib:.1f} GiB pinned memory and "
            f"{limits.active_thread_percentage}% of SMs each")


def _container(template: dict[str, Any], name: str) -> dict[str, Any]:
    return next((c for c in template.get("containers") or [] if c.get("name") == name), {})


def per_node_failure(template: dict[str, Any]) -> tuple[str, str] | None:
    """(device plugin release, why) a per-node MPS config never reaches the MPS control daemon whose
    DaemonSet pod template this is; None when it does (up to v0.18.1 init waits for the node label;
    or the sidecar's signal arrives) or the template has no daemon container to judge. A template
    rendered before the ClusterPolicy names a config has no config-manager yet: the operator adds
    the asset's, with the daemon's image and ASSET_PROCESS_TO_SIGNAL, when the enable points it at
    the ConfigMap."""
    daemon, sidecar = _container(template, DAEMON_CONTAINER), _container(template, SIDECAR)
    image = sidecar.get("image") or daemon.get("image", "")
    if not daemon or releases.init_waits_for_label(image):
        return None  # not the operator's daemon as its asset renders it: nothing to judge
    env = {e.get("name"): e.get("value", "") for e in sidecar.get("env") or []} if sidecar else {}
    target = env.get("PROCESS_TO_SIGNAL", ASSET_PROCESS_TO_SIGNAL)
    argv0 = next(iter(daemon.get("command") or []), "")
    failure = releases.signal_failure(image, target, argv0, bool(template.get("hostPID")))
    if failure is None:
        return None
    if failure == releases.KERNEL_THREAD_PANIC:
        return releases.tag(image), ("its scan of the node's processes panics on the first kernel thread "
                                     "(NVIDIA/k8s-device-plugin#1726, fixed in v0.20.0 by #1822)")
    return releases.tag(image), (f"it looks for PROCESS_TO_SIGNAL={target} but the daemon's argv[0] is {argv0}: "
                                 f'"{failure}" (NVIDIA/k8s-device-plugin PR #1827, not released)')


def _daemon(node: str, pods: list[dict[str, Any]]) -> OperandPod | None:
    return next((pod for pod in map(OperandPod, pods)
                 if pod.daemonset == MPS and pod.node == node and not pod.terminating), None)


def _sidecar_restarts(daemon: OperandPod) -> int:
    statuses = (daemon.raw.get("status") or {}).get("containerStatuses") or []
    return next((int(c.get("restartCount") or 0) for c in statuses if c.get("name") == SIDECAR), 0)


def failure_pending(node: str, pods: list[dict[str, Any]]) -> bool:
    """The MPS control daemon on `node` is within its config-manager's failure window: its sidecar
    cannot signal it (per_node_failure) but has not failed yet, so never_serves cannot say so yet.
    Until it does, a device plugin serving nothing there waits for that daemon: it is no
    NVIDIA/k8s-device-plugin#1645, and restarting the plugin would not help."""
    daemon = _daemon(node, pods)
    return (daemon is not None and per_node_failure(daemon.raw.get("spec") or {}) is not None
            and not _sidecar_restarts(daemon))


def never_serves(node: str, host: str | None, resource: str, allocatable: int, pods: list[dict[str, Any]]) -> str | None:
    """Why the MPS control daemon on `node` will never serve, or None: the node serves no `resource`,
    and its daemon pod's config-manager sidecar has failed since the pod started, as it always will
    there (per_node_failure). `pods`: the pods on the node (any namespace); `host`: its inventory
    host, when known, for the rollback's -l."""
    if allocatable > 0:
        return None
    daemon = _daemon(node, pods)
    failure = per_node_failure(daemon.raw.get("spec") or {}) if daemon else None
    if daemon is None or failure is None:
        return None
    restarts = _sidecar_restarts(daemon)
    if not restarts:
        return None
    version, why = failure
    return (f"{node}: the MPS control daemon never serves: its config-manager sidecar has failed {restarts} time(s) "
            f"since pod {daemon.name} started, because it cannot signal the daemon to load the node's MPS key (device "
            f"plugin {version}: {why}); the daemon waits (\"{NOT_CONFIGURED}\") and the device plugin runs on, serving "
            f"0 {resource}. Per-node MPS cannot work on this operator. Roll back: ansible-playbook "
            f"playbooks/rollback-timeslicing.yml -l {host or '<this node>'}; then use {WHAT_WORKS}.")
