"""A two-group worker-group table (a CPU group and a T4 group) with optional cloud columns."""
from __future__ import annotations

import pyarrow as pa

from vecsched.adapters import traces as T


def cloud_groups(**cloud):
    """Groups ``a`` (8 CPU) and ``b`` (8 CPU, 1 T4), ``cloud`` columns added as given."""
    cols = {"type": ["a", "b"], "cpu": [8.0, 8.0], "memory": [1e9, 1e9], "gpu": [0.0, 1.0],
            "gpu_model": [None, "T4"], "labels": pa.array([None, None], T.schema.LABELS_TYPE),
            "min_workers": [0, 0], "max_workers": [4, 4], "price": [1.0, 2.0]}
    cols.update(cloud)
    return pa.table(cols)
