"""The MIG manager on one node, with no I/O: what it writes next, given the node, its running
mig-manager pod and the run in progress. Follows NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure
(reconfigure.go `Run`) and cmd/nvidia-mig-manager/main.go (a run per start of its pod and per change
of the label, none otherwise: SyncableMigConfig.Get):

- an unknown config fails at once (`assert --valid-config`), before `pending`;
- a config already applied is `success` at once;
- a MIG mode change still not in effect after `rebooting` fails;
- otherwise `pending`, the GPU clients' deploy labels set to `paused-for-mig-change` (a "false"
  stays "false"), a wait until their pods are gone (waitForPodsToBeDeleted: 5 minutes; when they do
  not go in time the run just ends, leaving the node `pending` with its clients paused, and nothing
  happens until the label changes or the pod restarts), the change, the validator pod deleted, the
  labels restored ("false" stays "false", anything else becomes "true"), `success` — or `failed`
  when mig-parted cannot apply. A MIG mode change that needs a reboot goes through `rebooting` only
  with WITH_REBOOT in the pod's environment, which the GPU Operator never sets (assets
  state-mig-manager, TransformMigManager: only `migManager.env` can add it); without it the mode
  change does not take effect and the run ends `failed`.

Where its configs come from (main.go setupMigConfig): CONFIG_FILE (a custom ConfigMap) when set;
else the MIG manager generates them from the GPUs (keeping them in ConfigMap `<node>-mig-config`),
and falls back to DEFAULT_CONFIG_FILE (the operator's default-mig-parted-config) only when discovery
finds no MIG profile (older drivers).

Simulated-node annotations let tests reach the other paths: REBOOT_ANNOTATION (a MIG mode change on
this node needs a reboot), STALL_ANNOTATION (the MIG manager never finishes), DISCOVERY_ANNOTATION
(discovery finds no MIG profile) and CLIENT_TIMEOUT_ANNOTATION (a shorter wait for the clients)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpushare.gpu_catalog import GpuProduct
from gpushare_testbed.simulator.mig import Layout, apply, devices, mode_change
from gpushare_testbed.simulator.mig_parted import MigConfigError, parse_configs, select

MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
PAUSED = "paused-for-mig-change"
LAYOUT_ANNOTATION = "sim.gpushare.io/mig-layout"  # the simulated hardware: per GPU null (MIG off) or its MIG devices
REBOOT_ANNOTATION = "sim.gpushare.io/mig-reboot-required"
STALL_ANNOTATION = "sim.gpushare.io/mig-stall"
DISCOVERY_ANNOTATION = "sim.gpushare.io/mig-discovery"  # "none": no MIG profile discovered
CLIENT_TIMEOUT_ANNOTATION = "sim.gpushare.io/mig-client-timeout-seconds"
CLIENT_TIMEOUT_S = 300.0  # reconfigure.go waitForPodsToBeDeleted
CLIENT_LABELS = tuple(f"nvidia.com/gpu.deploy.{c}" for c in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm"))
OPTIONAL_CLIENT = "nvidia.com/gpu.deploy.client"  # paused and restored only when set


def client_daemonset_pod(pod: dict[str, Any]) -> bool:
    """A third-party GPU client (reconfigure.go waitForPodsWithNodeSelector, and the driver manager's
    WaitForPodsWithNodeSelector): a DaemonSet's pod whose nodeSelector has nvidia.com/gpu.deploy.client."""
    owner = next((o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), {})
    return owner.get("kind") == "DaemonSet" and OPTIONAL_CLIENT in ((pod.get("spec") or {}).get("nodeSelector") or {})


def applied_layout(annotations: dict[str, str], gpus: int) -> Layout:
    """The layout last applied: the annotation lists each GPU's MIG devices, the layout counts them."""
    raw = annotations.get(LAYOUT_ANNOTATION)
    return [dict(Counter(gpu)) if gpu is not None else None for gpu in json.loads(raw)] if raw else [None] * gpus


def _layout_annotation(layout: Layout) -> str:
    return json.dumps([devices(gpu) if gpu is not None else None for gpu in layout])


@dataclass(frozen=True)
class NodeFacts:
    labels: dict[str, str]
    annotations: dict[str, str]
    product: GpuProduct
    gpus: int
    config_text: str | None  # the mig-parted config.yaml the MIG manager reads; None when missing
    pod_uid: str  # the running mig-manager pod
    clients_running: bool  # device-plugin, GFD, DCGM exporter or DCGM pods still on the node
    with_reboot: bool = False  # WITH_REBOOT in the mig-manager container's environment
    client_timeout: float = CLIENT_TIMEOUT_S


@dataclass
class MigRun:
    pod_uid: str
    config: str
    previous: dict[str, str]  # the clients' deploy labels when the run began
    phase: str = "start"  # start | pending | rebooting | done | gave-up (clients never went: no retry)
    target: Layout | None = None
    error: str | None = None  # mig-parted cannot apply it: the run ends failed
    reboot_until: float = 0.0
    rebooted: bool = False
    paused_at: float = 0.0


@dataclass
class Decision:
    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    delete_validator: bool = False
    wake_after: float | None = None
    event: str | None = None  # a Warning event on the node


def _clients(labels: dict[str, str]) -> dict[str, str]:
    previous = {key: labels.get(key, "") for key in CLIENT_LABELS}
    if labels.get(OPTIONAL_CLIENT):
        previous[OPTIONAL_CLIENT] = labels[OPTIONAL_CLIENT]
    return previous


def _paused(previous: dict[str, str]) -> dict[str, str | None]:
    return {k: "false" if v == "false" else PAUSED for k, v in previous.items()}


def _restored(previous: dict[str, str]) -> dict[str, str | None]:
    return {k: "false" if v == "false" else "true" for k, v in previous.items()}


def _finish(run: MigRun, state: str, decision: Decision | None = None) -> Decision:
    decision = decision or Decision()
    decision.labels.update({**_restored(run.previous), MIG_STATE: state})
    run.phase = "done"
    return decision


def step(run: MigRun | None, facts: NodeFacts, now: float, reboot_s: float) -> tuple[MigRun, Decision | None]:
    """The next write of the MIG manager on this node (None: nothing to do now)."""
    wanted = facts.labels.get(MIG_CONFIG, "")
    over = run is not None and run.phase in ("done", "gave-up")
    if run is None or run.pod_uid != facts.pod_uid or (over and run.config != wanted):
        run = MigRun(facts.pod_uid, wanted, _clients(facts.labels))
    if run.phase in ("done", "gave-up") or not wanted or facts.config_text is None:
        return run, None
    current = applied_layout(facts.annotations, facts.gpus)
    if run.phase == "start":
        try:
            entries = select(parse_configs(facts.config_text), wanted)
        except MigConfigError as err:
            return run, _finish(run, "failed", Decision(event=str(err)))
        try:
            run.target = apply(facts.product, current, entries)
        except MigConfigError as err:
            run.error = str(err)
        if run.error is None and run.target == current:
            return run, _finish(run, "success")
        if facts.labels.get(MIG_STATE) == "rebooting" and run.target is not None and mode_change(current, run.target):
            return run, _finish(run, "failed", Decision(event="MIG mode change did not take effect after rebooting"))
        run.phase, run.paused_at = "pending", now
        # look again at once: a node already pending with its clients paused (a new MIG manager
        # retrying) gets no write from this, so no node event would bring it back
        return run, Decision(labels={MIG_STATE: "pending", **_paused(run.previous)}, wake_after=0.0)
    if run.phase == "pending":
        if facts.annotations.get(STALL_ANNOTATION) == "true":
            return run, None  # never finishing
        if facts.clients_running:
            left = facts.client_timeout - (now - run.paused_at)
            if left <= 0:  # "failed to wait for pods to be deleted": the run ends, nothing restored
                run.phase = "gave-up"
                return run, None
            return run, Decision(wake_after=left)
        if (run.error is None and run.target is not None and mode_change(current, run.target) and not run.rebooted
                and facts.annotations.get(REBOOT_ANNOTATION) == "true"):
            if not facts.with_reboot:  # applyMigModeChange fails, no reboot; applyMigConfig then fails
                return run, _finish(run, "failed", Decision(
                    event="failed to apply MIG configuration: the MIG mode change needs a reboot of the node, and "
                          "WITH_REBOOT is not set"))
            run.phase, run.reboot_until = "rebooting", now + reboot_s
            return run, Decision(labels={MIG_STATE: "rebooting"}, wake_after=reboot_s)
        return run, _apply(run)
    if run.phase == "rebooting":
        if now < run.reboot_until:
            return run, Decision(wake_after=run.reboot_until - now)
        run.phase, run.rebooted = "pending", True  # back from the reboot: a new run, MIG mode now set
        return run, Decision(labels={MIG_STATE: "pending"})
    return run, None


def _apply(run: MigRun) -> Decision:
    if run.error is not None or run.target is None:
        return _finish(run, "failed", Decision(event=run.error))
    decision = Decision(annotations={LAYOUT_ANNOTATION: _layout_annotation(run.target)}, delete_validator=True)
    return _finish(run, "success", decision)
