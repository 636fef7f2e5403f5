"""Where the control-plane binaries and the simulator's nvidia-judge live: built once by
scripts/build-binaries.sh into a cache."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-binaries.sh"


class BinaryError(RuntimeError):
    """A control-plane binary is missing; the message says how to get it."""


def binary_dir(with_kueue: bool = True) -> Path:
    """The directory holding the binaries: $GPUSHARE_BIN_DIR, else built (or reused) from the cache,
    Kueue's only when asked for."""
    configured = os.environ.get("GPUSHARE_BIN_DIR")
    if configured:
        directory = Path(configured)
    elif BUILD_SCRIPT.exists():
        # The script reuses the cache and prints progress on stderr while it builds.
        result = subprocess.run([str(BUILD_SCRIPT), *([] if with_kueue else ["--without", "kueue"])],
                                check=False, stdout=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise BinaryError(f"building the control plane failed (exit {result.returncode}); see the output above")
        directory = Path(result.stdout.strip().splitlines()[-1])
    else:
        raise BinaryError("set GPUSHARE_BIN_DIR to a directory holding " + ", ".join(REQUIRED))
    missing = [name for name in REQUIRED if not (directory / name).is_file()]
    if missing:
        raise BinaryError(
            f"missing in {directory}: {', '.join(missing)}; run `make binaries` "
            "or point GPUSHARE_BIN_DIR at a directory that has them"
        )
    return directory


def nvidia_judge() -> Path:
    """NVIDIA's device-plugin config loader, which the simulated GPU Operator asks (build/nvidia-judge)."""
    path = binary_dir() / "nvidia-judge"
    if not path.is_file():
        raise BinaryError(f"missing {path}; run `make binaries` or put nvidia-judge beside the control plane's binaries")
    return path
