"""NVIDIA's own verdict on a device-plugin config, for the simulated device plugin, GFD and MPS
control daemon.

build/nvidia-judge is NVIDIA/k8s-device-plugin's api/config/v1 (NewConfig: the file, then the
command-line and environment flags over it) and each component's checks of the result, built from
the Go module proxy at the pinned release with v0.20.0's changes on top (see its main.go). It runs
as one long-lived process per simulator; each distinct (component, environment, text) is asked once.

The runbooks' own validators (gpushare.device_plugin_config) take no part in this decision, nor do
their types: the simulator reads the judge's answer into its own (PluginConfig below).
tests/integration/test_nvidia_judge_corpus.py holds the validators to this judge's verdicts."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEVICE_PLUGIN, GFD, MPS_CONTROL_DAEMON = "device-plugin", "gpu-feature-discovery", "mps-control-daemon"
GPU, MIG_PREFIX = "nvidia.com/gpu", "nvidia.com/mig-"
CACHE_SIZE = 4096  # distinct verdicts kept; a simulator sees a few dozen configs


class ConfigError(ValueError):
    """A component refuses its config; str() is the error it exits with."""


@dataclass(frozen=True)
class Sharing:
    """How a component shares nvidia.com/gpu and MIG devices (GFD's labels: internal/lm/resource.go)."""

    strategy: str  # none | time-slicing | mps
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    replicas: int = 1  # replicas of nvidia.com/gpu (1 = not shared)
    mig: tuple[tuple[str, int], ...] = ()  # replicas of each nvidia.com/mig-<profile> it shares


@dataclass(frozen=True)
class PluginConfig:
    """What a component runs with: its MIG strategy (its environment's, else the file's, else none) and sharing."""

    mig_strategy: str
    sharing: Sharing


NO_SHARING = PluginConfig(mig_strategy="none", sharing=Sharing("none"))


class JudgeError(RuntimeError):
    """nvidia-judge could not judge a request (it is missing, it died, or it refused the request)."""


@dataclass(frozen=True)
class Verdict:
    error: str | None  # the component's refusal, as its start returns it; None when it accepts
    config: PluginConfig | None  # what it runs with, when it accepts
    resolved: Mapping[str, Any] | None  # the config as it prints it ("Running with config")


class NvidiaJudge:
    """One nvidia-judge process, shared by the simulator's threads."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._cache: OrderedDict[tuple[str, tuple[tuple[str, str], ...], str], Verdict] = OrderedDict()

    def load(self, component: str, env: Mapping[str, str], text: str) -> PluginConfig:
        """What `component` runs with given this config file and its container's environment, or
        ConfigError with the error it exits with."""
        verdict = self.verdict(component, env, text)
        if verdict.config is None:
            raise ConfigError(verdict.error)
        return verdict.config

    def verdict(self, component: str, env: Mapping[str, str], text: str) -> Verdict:
        key = (component, tuple(sorted(env.items())), text)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
            answer = self._ask({"component": component, "env": dict(env), "config": text})
            if answer.get("fault"):
                raise JudgeError(f"nvidia-judge could not judge a {component} config: {answer['fault']}")
            if answer["accepted"]:
                resolved = answer["config"]
                verdict = Verdict(None, plugin_config(resolved, answer["sharingStrategy"]), resolved)
            else:
                verdict = Verdict(answer["error"], None, None)
            self._cache[key] = verdict
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
            return verdict

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                self._stop(self._process)
                self._process = None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._process is None:
            try:
                self._process = subprocess.Popen(
                    [str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, encoding="utf-8")
            except OSError as err:
                raise JudgeError(f"cannot start {self.binary}: {err}; run `make binaries`") from None
        process = self._process
        assert process.stdin is not None and process.stdout is not None  # noqa: S101 - set by Popen above
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self._process = None
            stderr = self._stop(process)
            raise JudgeError(f"{self.binary} exited ({process.returncode}): {stderr.strip() or 'no output'}")
        return json.loads(line)

    @staticmethod
    def _stop(process: subprocess.Popen[str]) -> str:
        """Close its input (it exits at the end of it) and return what it wrote on stderr."""
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        return stderr or ""


def plugin_config(resolved: Mapping[str, Any], strategy: str) -> PluginConfig:
    """The simulator's model of a resolved config: the MIG strategy it runs with and how it shares
    nvidia.com/gpu (GFD labels the first entry of a name: internal/lm/resource.go) and MIG devices."""
    sharing = resolved.get("sharing") or {}
    replicated = sharing["mps"] if sharing.get("mps") is not None else sharing.get("timeSlicing") or {}
    resources = replicated.get("resources") or []
    mig: dict[str, int] = {}
    for resource in resources:
        if resource["name"].startswith(MIG_PREFIX):
            mig.setdefault(resource["name"], resource["replicas"])
    rename = bool(replicated.get("renameByDefault"))
    mig_strategy = str((resolved.get("flags") or {}).get("migStrategy") or "none")
    gpu = next((resource for resource in resources if resource["name"] == GPU), None)
    if gpu is None:
        return PluginConfig(mig_strategy, Sharing("none", rename_by_default=rename and bool(mig), mig=tuple(mig.items())))
    return PluginConfig(mig_strategy, Sharing(
        strategy,
        rename_by_default=rename,
        fail_requests_greater_than_one=bool(replicated.get("failRequestsGreaterThanOne")),
        replicas=gpu["replicas"],
        mig=tuple(mig.items()),
    ))
