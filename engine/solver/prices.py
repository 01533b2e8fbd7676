"""Prices per node-hour of the node types: the worker groups' own, or a proxy.

The efficient mode compares types by them and the CP-SAT model charges them
(as integers: ``price_scale``)."""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.problem import Problem


def proxy_prices(p: Problem, gpu_weight: float = 1.0) -> np.ndarray:
    """(T,) price per node-hour when no worker group has one: 1 per node plus
    ``gpu_weight`` per GPU - node-hours, with a GPU-hour costing as much as a
    node-hour, so GPU-hours dominate on GPU types and fewer, larger nodes win ties."""
    gpus = p.type_cap[:, p.gpu_col] if p.gpu_col >= 0 else np.zeros(p.T)
    return 1.0 + gpu_weight * gpus


def price_vector(p: Problem, prices=None, gpu_weight: float = 1.0) -> np.ndarray:
    """(T,) f8 prices: ``prices`` (a mapping type name -> price per node-hour, or a
    (T,) array) when it prices every configured type the tick could launch, else
    ``proxy_prices``. A configured type with no launch room (at its
    ``max_worker_nodes``, like a head type listed with its one node) needs no price:
    it is given the dearest known one (nothing launches it, so nothing pays it)."""
    if prices is None:
        return proxy_prices(p, gpu_weight)
    if isinstance(prices, dict):
        vec = np.full(p.T, np.nan)
        for t, name in enumerate(p.type_names):
            if name in prices and prices[name] is not None:
                vec[t] = float(prices[name])
    else:
        vec = np.asarray(prices, float).reshape(-1)
        if vec.shape != (p.T,):
            raise ValueError(f"prices: expected {p.T} values, one per node type, got {vec.shape}")
    conf = p.type_configured
    missing = conf & np.isnan(vec)
    if missing.any():
        have = np.bincount(p.node_type[~p.node_outdated], minlength=p.T)
        if (missing & (p.type_max > have)).any() or not (conf & ~missing).any():
            return proxy_prices(p, gpu_weight)
        vec = np.where(missing, np.nanmax(vec[conf & ~missing]), vec)
    bad = conf & ~(np.isfinite(vec) & (vec > 0))
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ValueError(f"prices[{p.type_names[t]!r}]: must be a finite number > 0, got {vec[t]}")
    return np.where(conf, vec, 0.0)


def price_scale(prices: np.ndarray) -> float:
    """Least power of ten (<= 1e6) making every price integral; 1e6 otherwise."""
    for k in range(7):
        x = prices * 10.0 ** k
        if np.all(np.abs(x - np.round(x)) <= 1e-9 * np.maximum(1.0, x)):
            return 10.0 ** k
    return 1e6
