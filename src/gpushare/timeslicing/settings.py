"""The enable runbook's inputs, checked beyond what the argument spec can say, and the device-
plugin config they render to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from gpushare import device_plugin_config as dpc
from gpushare import mps
from gpushare.model.node import Pool
from gpushare.model.taints import Taint
from gpushare.runbook.inputs import DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, as_bool, optional_int
from gpushare.runbook.records import RECORDS_NAMESPACE
from gpushare.timeslicing import xid
from gpushare.timeslicing_common.sharing import DEFAULT_KEY

# The no-sharing config every GPU node without a per-node label reads once the ClusterPolicy points
# at the ConfigMap. No flags: the operator's MIG_STRATEGY environment keeps deciding MIG.
DEFAULT_CONFIG = "version: v1\n"
STRATEGIES = ("time-slicing", "mps")  # the sharing strategies this runbook enables
_CONFIG_SECTION = {"time-slicing": "timeSlicing", "mps": "mps"}


@dataclass(frozen=True)
class SharedConfig:
    """The device-plugin config that goes under the key, read once as the device plugin reads it."""

    text: str
    error: str = ""  # why the device plugin refuses it; "" when it reads it
    strategy: str = ""  # the sharing strategy it gives (when read)
    ignored: tuple[str, ...] = ()  # what the device plugin accepts in it but ignores (dpc.lint)

    @classmethod
    def read(cls, text: str) -> tuple[SharedConfig, dpc.Sharing | None]:
        """The config, and how it shares nvidia.com/gpu (None when the device plugin refuses it)."""
        try:
            sharing = dpc.parse(text).sharing
        except dpc.ConfigError as err:
            return cls(text, error=str(err)), None
        return cls(text, strategy=sharing.strategy, ignored=tuple(dpc.lint(text))), sharing


def _seed_config(strategy: str, rename_by_default: bool, fail_requests_greater_than_one: bool, replicas: int) -> str:
    """The seed's config for these inputs."""
    return yaml.safe_dump({
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {_CONFIG_SECTION.get(strategy, "timeSlicing"): {
            "renameByDefault": rename_by_default,
            "failRequestsGreaterThanOne": fail_requests_greater_than_one,
            "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
        }},
    }, default_flow_style=False, sort_keys=False)


@dataclass(frozen=True)
class Settings:
    """The inputs, read once. `replicas`, `rename_by_default` and `fail_requests_greater_than_one` are
    the config's, as the device plugin reads it: timeslicing_config_override's own when one is given."""

    replicas: int
    max_replicas: int
    rename_by_default: bool
    fail_requests_greater_than_one: bool
    scope: str
    confirm_cluster_scope: bool
    configmap: str
    key: str
    override: str
    config: SharedConfig  # what goes under `key`: the override as given, else the seed's config
    pool: Pool
    confirm_fleet_roll: bool
    fleet_roll_confirm_above: int
    confirm_operand_roll: bool
    namespace: str
    clusterpolicy: str
    records_namespace: str = RECORDS_NAMESPACE  # the run records' and the lock's (the runbooks' own)
    backup_dir: str = "backups"  # of the ClusterPolicy backup files, on the control machine
    strategy: str = "time-slicing"  # time-slicing | mps (the device plugin's sharing.timeSlicing or sharing.mps)
    memory_peak_mib: int | None = None  # the workloads' memory peak per pod (the baseline's), when known
    prometheus_url: str = ""  # scraping the DCGM exporter: the Xid check (gpushare.timeslicing.xid); '' skips it
    xid_window: str = "24h"

    @classmethod
    def of(cls, values: dict[str, Any]) -> Settings:
        """From the role's variables (already type-checked by its argument spec)."""
        override = values.get("config_override") or ""
        if isinstance(override, dict):
            override = yaml.safe_dump(override, default_flow_style=False, sort_keys=False)
        taint = ({"key": values["pool_taint_key"], "value": values["pool_taint_value"]}
                 if as_bool(values.get("pool_taint", True)) else None)
        strategy = str(values.get("sharing_strategy") or "time-slicing")
        replicas = int(values.get("replicas", 2))
        rename_by_default = as_bool(values.get("rename_by_default", True))
        fail_requests_greater_than_one = as_bool(values.get("fail_requests_greater_than_one", True))
        config, sharing = SharedConfig.read(str(override) or _seed_config(
            strategy, rename_by_default, fail_requests_greater_than_one, replicas))
        if sharing is not None:
            replicas, rename_by_default = sharing.replicas, sharing.rename_by_default
            fail_requests_greater_than_one = sharing.fail_requests_greater_than_one
        return cls(
            replicas=replicas, max_replicas=int(values.get("max_replicas", 16)),
            rename_by_default=rename_by_default, fail_requests_greater_than_one=fail_requests_greater_than_one,
            scope=str(values.get("scope", "node")), confirm_cluster_scope=as_bool(values.get("confirm_cluster_scope")),
            configmap=str(values["configmap_name"]), key=str(values["config_key"]), override=str(override), config=config,
            pool=Pool.of({"label_key": values["pool_label_key"], "label_value": values["pool_label_value"],
                          "taint": taint}),
            confirm_fleet_roll=as_bool(values.get("confirm_fleet_roll")),
            fleet_roll_confirm_above=int(values.get("fleet_roll_confirm_above", 10)),
            confirm_operand_roll=as_bool(values.get("confirm_operand_roll")),
            namespace=str(values["namespace"]), clusterpolicy=str(values["clusterpolicy_name"]),
            records_namespace=str(values.get("records_namespace") or RECORDS_NAMESPACE),
            backup_dir=str(values.get("backup_dir") or "backups"),
            strategy=strategy,
            memory_peak_mib=optional_int(values.get("memory_peak_mib")) or None,  # 0: not given
            prometheus_url=str(values.get("prometheus_url") or ""), xid_window=str(values.get("xid_window") or "24h"),
        )

    @property
    def mechanism(self) -> str:
        """The strategy's name in the operator's words."""
        return "MPS" if self.strategy == "mps" else "time-slicing"

    @property
    def pool_taint(self) -> Taint | None:
        return self.pool.taint

    def problems(self) -> list[str]:
        """Every input problem, each one actionable; empty when the inputs are good."""
        problems = []
        if self.strategy not in STRATEGIES:
            return [f"timeslicing_sharing_strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}."]
        if self.strategy == "mps":
            problems += self._mps_problems()
        if self.max_replicas < 2:
            problems.append(f"timeslicing_max_replicas must be at least 2, got {self.max_replicas}.")
        if self.prometheus_url and not re.match(r"https?://[^/\s]+", self.prometheus_url):
            problems.append(f"timeslicing_prometheus_url must be http(s)://host:port of the Prometheus that scrapes the "
                            f"DCGM exporter, or empty to skip the Xid check; got {self.prometheus_url!r}.")
        if window := xid.window_problem(self.xid_window):
            problems.append(window)
        if not self.override and self.replicas > self.max_replicas:
            problems.append(
                f"timeslicing_replicas={self.replicas} is above the bound of {self.max_replicas} shares per GPU: "
                "time-slicing gives no memory or fault isolation, and every pod on a card waits for all the others. "
                f"Use at most {self.max_replicas}, or raise timeslicing_max_replicas deliberately.")
        if self.scope == "cluster" and not self.confirm_cluster_scope:
            problems.append(
                "timeslicing_scope=cluster changes EVERY GPU node of the cluster at once (the ClusterPolicy's default "
                "device-plugin config), not only the limited node(s). Confirm with -e timeslicing_confirm_cluster_scope=true, "
                "or keep timeslicing_scope=node (the default) to try time-slicing on the limited node(s) only.")
        if not DNS_SUBDOMAIN.match(self.configmap):
            problems.append(f"timeslicing_configmap_name {self.configmap!r} is not a valid ConfigMap name (a DNS subdomain).")
        if self.key == DEFAULT_KEY:
            problems.append("timeslicing_config_key must not be `default`: that key is the no-sharing config every "
                            "other GPU node uses; keep the seed's `shared`.")
        elif not self.key or not LABEL_VALUE.match(self.key):
            problems.append(f"timeslicing_config_key {self.key!r} must be a valid label value (it becomes the node "
                            "label nvidia.com/device-plugin.config).")
        if not LABEL_KEY.match(self.pool.label_key) or not LABEL_VALUE.match(self.pool.label_value):
            problems.append(f"the pool label {self.pool.label_key}={self.pool.label_value} is not a valid label.")
        taint = self.pool.taint
        if taint and (not LABEL_KEY.match(taint.key) or not LABEL_VALUE.match(taint.value)):
            problems.append(f"the pool taint {taint} is not a valid taint (key and value follow the label rules).")
        problems += self.config_problems()
        return problems

    def config_problems(self) -> list[str]:
        config = self.config
        source = "timeslicing_config_override" if self.override else "the rendered config"
        if config.error:
            if "replicas must be >= 2" in config.error and not self.override:
                return [f"timeslicing_replicas={self.replicas}: use at least 2 shares per GPU (1 means no sharing). "
                        f"The device plugin would refuse this config: {config.error}"]
            fix = "Fix timeslicing_config_override, or leave it empty. " if self.override else ""
            return [f"The device plugin would refuse {source} for key `{self.key}`. {fix}Its error: {config.error}"]
        problems = [f"{source}: {p} (the device plugin would silently ignore it)" for p in config.ignored]
        if self.override and self.replicas > self.max_replicas:
            problems.append(f"{source} asks for {self.replicas} replicas per GPU, above the bound of "
                            f"{self.max_replicas}: use fewer, or raise timeslicing_max_replicas deliberately.")
        if config.strategy != self.strategy:
            problems.append(f"{source} gives sharing strategy `{config.strategy}`, not {self.mechanism} of "
                            f"nvidia.com/gpu: this run enables {self.mechanism} only.")
        elif self.strategy == "mps" and self.override and not self.fail_requests_greater_than_one:
            problems.append(self._fail_requests_problem(source))
        return problems

    def _fail_requests_problem(self, source: str) -> str:
        return (f"{source}: failRequestsGreaterThanOne: false with MPS lets a container take several shares of a "
                "card, but the MPS control daemon limits every client to ONE share's pinned memory and SMs "
                "(set_default_device_pinned_mem_limit / set_default_active_thread_percentage): it would get one "
                "share's limits while the node counts several. Keep failRequestsGreaterThanOne: true.")

    def _mps_problems(self) -> list[str]:
        problems = []
        if not self.override and not self.fail_requests_greater_than_one:
            problems.append(self._fail_requests_problem("timeslicing_fail_requests_greater_than_one=false"))
        refusal = mps.replicas_problem(self.replicas) if not self.override else None
        if refusal:
            problems.append(f"mps_replicas={self.replicas}: the MPS control daemon would refuse it ({refusal}): "
                            f"use at most {mps.MAX_CLIENTS}.")
        return problems

    def memory_problem(self, node: str, product: str, memory_mib: int | None) -> str | None:
        """MPS: the per-share pinned memory limit below the workloads' memory peak (when given)."""
        if self.strategy != "mps" or self.memory_peak_mib is None or not memory_mib:
            return None
        limits = mps.share_limits(memory_mib, self.replicas)
        if limits.pinned_memory_mib >= self.memory_peak_mib:
            return None
        fits = memory_mib // self.memory_peak_mib
        advice = (f"use at most {fits} replicas" if fits >= 2 else
                  "this card cannot hold two shares of that peak: keep it whole")
        return (f"{node}: {self.replicas} MPS shares of {product} give {limits.pinned_memory_mib} MiB pinned memory each, below "
                f"the workloads' memory peak of {self.memory_peak_mib} MiB (the baseline's): a pod would fail to "
                f"allocate at its peak. {advice[0].upper()}{advice[1:]}.")

    @property
    def resource(self) -> str:
        return "nvidia.com/gpu.shared" if self.rename_by_default else "nvidia.com/gpu"
