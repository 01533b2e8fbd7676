"""The named records the packing kernels pass around: named tuples of arrays,
which numba types field by field (one compiled specialisation per record
layout, fields read by name). Shapes use M slots, R resource columns, L label
keys, H placed-request history, Q request rows, K runs, C candidates, T types.

A record is a value: a kernel may write into its arrays, never rebind its
fields. Records whose arrays grow (a context after ``_grow``, a class table)
are rebuilt by whoever grows them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Slots(NamedTuple):
    """What a walk and a score read of each slot (engine/raycompat/context.py rows)."""
    total: np.ndarray       # (M, R) f8 total resources
    order: np.ndarray       # (M, R) i4 the totals' columns in dict order, -1 padded
    label: np.ndarray       # (M, L) i4 value id per label key, -1 absent
    type: np.ndarray        # (M,) i4 node type
    status: np.ndarray      # (M,) i1 instance status
    kind: np.ndarray        # (M,) i1 head / worker
    rec: np.ndarray         # (M,) f8 recoverable availability (pick key, 6th)
    prio: np.ndarray        # (M,) i8 type priority (pick key, 7th)
    avail: np.ndarray       # (M,) f8 cloud availability (pick key, 8th)


class Source(NamedTuple):
    """One request source's availability and placements per slot (demand, or
    the request_resources() constraint)."""
    free: np.ndarray        # (M, R) f8 effective free (an absent implicit column holds 1.0)
    present: np.ndarray     # (M, R) b1 column in the availability map
    placed_res: np.ndarray  # (M, R) b1 a placed request asks for the column
    placed_gpu: np.ndarray  # (M,) b1 a placed request names GPU
    placed_any: np.ndarray  # (M,) b1 anything placed
    hist: np.ndarray        # (M, H) i4 placed request rows that have selectors, in order
    nhist: np.ndarray       # (M,) i8 entries of hist in use


class Marks(NamedTuple):
    """Class caches a slot leaves when it changes (engine/raycompat/context.py)."""
    rcls: np.ndarray        # (M,) i4 strict class of running slots, demand (-1 none)
    crcls: np.ndarray       # (M,) i4 the same for the constraint source
    lcls: np.ndarray        # (M,) i4 NodeStateCache class, demand (-2 recompute)
    clcls: np.ndarray       # (M,) i4 the same for the constraint source
    ghash: np.ndarray       # (M,) f8 the gang kernel's key digest (NaN recompute)


class Reqs(NamedTuple):
    """The request table (engine/raycompat/requests_view.py): one row per request."""
    qty: np.ndarray         # (Q, R) f8 bundle
    cols: np.ndarray        # (Q, R) i4 positive columns, first ncols valid
    ncols: np.ndarray       # (Q,) i4
    gpu_key: np.ndarray     # (Q,) b1 the bundle names GPU (even with 0)
    anti: np.ndarray        # (Q, 2) i4 anti-affinity (label key, value), -1 none
    sel_lo: np.ndarray      # (Q,) i4 row q's selectors are sel_lo[q]..sel_hi[q]
    sel_hi: np.ndarray      # (Q,) i4
    sel_con_ptr: np.ndarray  # selector i's constraints are sel_con_ptr[i]..[i + 1]
    con_key: np.ndarray     # constraint c: label key,
    con_op: np.ndarray      # operator (1 in, else not in),
    con_val_ptr: np.ndarray  # values con_vals[con_val_ptr[c]..[c + 1]]
    con_vals: np.ndarray
    has_sel: np.ndarray     # (Q,) b1 the row has selectors


class Rules(NamedTuple):
    """How quantities compare and score in this tick."""
    implicit: np.ndarray    # (R,) b1 implicit resource (absent means 1.0)
    exact: np.ndarray       # (R,) b1 values on a dyadic grid (k * v is k subtractions)
    gpu_col: int            # column of "GPU", -1 none
    conserve_gpu: bool      # Ray's AUTOSCALER_CONSERVE_GPU_NODES


class PackState(NamedTuple):
    """Everything one packing reads or writes, for one request source."""
    slots: Slots
    src: Source
    marks: Marks
    rq: Reqs
    rules: Rules


class Cands(NamedTuple):
    """The candidates of one packing loop in list order, each with its cached
    trial walk (pick.py): the first n entries are in use."""
    slot: np.ndarray        # (C,) i8 slot id
    alive: np.ndarray       # (C,) b1 still a candidate
    fresh: np.ndarray       # (C,) b1 cached walk and score up to date
    taken: np.ndarray       # (C, K) i8 units per run of the cached walk
    placed: np.ndarray      # (C,) b1 the walk places anything
    label_score: np.ndarray  # (C,) i8 pick key 1
    gpu_ok: np.ndarray      # (C,) i8 pick key 2
    match: np.ndarray       # (C,) i8 pick key 3
    util_min: np.ndarray    # (C,) f8 pick key 4
    util_mean: np.ndarray   # (C,) f8 pick key 5


class Classes(NamedTuple):
    """Equivalence classes of a loop's candidates (tried once per pick, by
    their first member)."""
    of: np.ndarray          # (M,) i4 class per slot, -1 alone
    n: int                  # number of classes
    strict_from: int        # ids >= this are strict (running twins that may win together)


class PickScratch(NamedTuple):
    """Rows a pick walks on (pick.py); ``seen`` has room for every class."""
    seen: np.ndarray        # (ncls,) b1
    free: np.ndarray        # (R,) f8
    present: np.ndarray     # (R,) b1
    res: np.ndarray         # (R,) b1
    hist: np.ndarray        # (H,) i4
    was: np.ndarray         # (K,) i4 labels the walk overwrote


class LoopMode(NamedTuple):
    """What a packing loop picks from (loop.py)."""
    templates: bool         # candidates are pristine templates, cloned on winning
    avail: np.ndarray       # (T,) i8 launches left per type (templates)
    room: int               # most winners, -1 unbounded
    batching: bool          # take runs of identical picks at once


class GangRuns(NamedTuple):
    """The tick's gangs in Ray's order (gangs.py)."""
    ptr: np.ndarray         # (G + 1,) i8 gang g's runs are ptr[g]..ptr[g + 1]
    run: np.ndarray         # i4 request row of each run
    cnt: np.ndarray         # i8 units of each run
    shape: np.ndarray       # i4 resource shape of each run
    shape_row: np.ndarray   # (S,) i4 a request row of each shape


class Launch(NamedTuple):
    """What limits launches (gangs.py)."""
    pristine: np.ndarray    # (T,) i4 template slot of each configured type, -1 none
    type_max: np.ndarray    # (T,) i8 max_worker_nodes
    configured: np.ndarray  # (T,) b1
    max_nodes: int          # global max_num_nodes, -1 none


def cands(cap: int, K: int) -> Cands:
    """Room for cap candidates of K runs."""
    z = np.zeros
    return Cands(z(cap, np.int64), z(cap, np.bool_), z(cap, np.bool_), z((cap, K), np.int64),
                 z(cap, np.bool_), z(cap, np.int64), z(cap, np.int64), z(cap, np.int64),
                 z(cap), z(cap))
