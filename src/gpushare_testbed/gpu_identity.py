"""What a simulated card reports about itself through NVML: its product name and its UUID, one value
for the DCGM exporter, the DRA driver and nvidia-smi."""

from __future__ import annotations

import uuid

# NVML's names for the products GFD labels with dashes (gpu_catalog names).
NVML_NAMES = {
    "NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-L4": "NVIDIA L4",
    "Tesla-T4": "Tesla T4",
}
_UUID_NAMESPACE = uuid.UUID("6f0c4f52-3c1b-4f3e-9a57-1d1b0c5e9a10")


def nvml_name(product_label: str) -> str:
    """NVML's product name (what DCGM's modelName and the DRA driver's productName say)."""
    return NVML_NAMES.get(product_label, product_label.replace("-", " "))


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of a simulated node's GPU."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"
