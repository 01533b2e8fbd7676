"""ILLUSTRATIVE prices per node-hour for the bundled worker groups, so the replay's cost
row shows on the bundled traces. They are not quotes and were not checked against any
price list: the traces' clusters are Alibaba's own machines, several GPU models are
undisclosed (G1, G2, G3, GPU-series-1, GPU-series-2, MISC), and none has a public price.

The model: a node-hour costs ``CPU_RATE`` per vCPU, ``GIB_RATE`` per GiB of memory and a
per-GPU rate by model (``GPU_RATES``). The GPU rates are of the order of public
on-demand list prices for the models a few years ago (T4 well under a dollar an hour,
P100 and V100 one to three, A100/A800 80GB around four, H800 near ten); undisclosed
models get ``UNDISCLOSED_GPU_RATE``. Relative, not absolute: use cost to compare
schedulers on the same worker groups, and give real prices in the ``price`` column for
anything else. The units are "price units", no currency.
"""
from __future__ import annotations

from typing import Optional

CPU_RATE = 0.04            # per vCPU-hour
GIB_RATE = 0.005           # per GiB-hour
UNDISCLOSED_GPU_RATE = 1.50
GPU_RATES = {              # per GPU-hour, by the worker groups' gpu_model
    "T4": 0.35,
    "P100": 1.46,
    "V100": 2.48, "V100M16": 2.48, "V100M32": 2.48,
    "A10": 1.00,
    "A100-SXM4-80GB": 3.90, "A800-SXM4-80GB": 3.90,
    "H800": 9.80,
    "MISC": 0.45,          # K40m / K80 / M60
}
SOURCE = ("illustrative prices, not quotes (adapters/traces/group_prices.py): "
          f"{CPU_RATE:g} per vCPU-hour + {GIB_RATE:g} per GiB-hour + a per-GPU-hour rate by "
          f"model ({UNDISCLOSED_GPU_RATE:g} for undisclosed models)")


def illustrative_price(cpu: float, memory_bytes: float, gpu: float,
                       model: Optional[str]) -> float:
    """The illustrative price of one node-hour (see the module docstring), 4 decimals."""
    rate = GPU_RATES.get(model, UNDISCLOSED_GPU_RATE) if model else 0.0
    return round(CPU_RATE * cpu + GIB_RATE * memory_bytes / 2 ** 30 + rate * gpu, 4)
