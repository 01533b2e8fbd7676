"""The mutable state of one tick: scheduling-node slots as arrays, and their order.

Ray keeps a list of node objects and deep-copies it in every phase. Here each
node is a slot (a row in every array); a phase rewrites ``nodes`` (the list
Ray would hold, as slot ids) and edits rows in place. Slots < N are the
Problem's nodes; later slots are nodes the tick adds (min workers, launches)
or trial templates that were never chosen (not in ``nodes``).

Two request sources keep separate availability and placement records, as in
Ray: source 0 is pending demand (starts from the node's free resources),
source 1 the ``request_resources()`` constraint (starts from its totals).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import CNT, IDX, PRIVATE_PREFIX, QTY, Cause, Kind, Sched, Status
from vecsched.engine.model.ippr import FIELDS as _IPPR
from vecsched.engine.kernels.records import Marks, PackState, Rules, Slots, Source
from vecsched.engine.model.problem import Problem, order_mask
from .labelcols import label_columns
from .transaction import Transactions, _Transaction

DEMAND, CONSTRAINT = 0, 1
_PREFIX = ("", "c")              # the constraint source's rows are named c<name>
_SRC = Source._fields
# Every per-slot array, in one list: they grow together (_grow) and a new or
# copied slot writes a row of each.
ROWS = (Slots._fields + ("idle", "has_ray", "sched", "cause", "cause_value", "template")
        + _SRC + tuple("c" + k for k in _SRC) + tuple("ippr_" + k for k in _IPPR)
        + Marks._fields)
# Rows set outside packing, which a transaction never needs to put back.
_FIXED = frozenset(("type", "template", "status", "kind", "idle", "has_ray", "prio", "rec",
                    "avail", "sched", "cause", "cause_value", "ippr_attached", "ippr_failed",
                    "ippr_raylet", "ippr_cur", "ippr_max"))
_MUTABLE = tuple(k for k in ROWS if k not in _FIXED)
_FILL = {"order": -1, "label": -1, "hist": -1, "chist": -1, "status": Status.NONE,
         "rcls": -2, "crcls": -2, "lcls": -2, "clcls": -2, "ghash": np.nan,
         "kind": Kind.WORKER, "rec": 1.0, "avail": 1.0, "template": -1}


def _reserve(p: Problem) -> int:
    """Slots to allocate beyond the nodes: the templates, and one per possible
    launch (each unit of demand, at most the room left under the types' caps),
    at most N more (``_grow`` takes over past that). Sized once, so a tick does
    not copy every array to grow by a few rows."""
    have = np.bincount(p.node_type, minlength=p.T)[: p.T]
    room = int(np.maximum(p.type_max - have, 0)[p.type_configured].sum())
    units = int(p.shape_count.sum()) + len(p.gang_req) + len(p.con_req)
    return max(16, p.T + 1 + min(units, room, p.N))


def _rows(a: np.ndarray, cap: int) -> np.ndarray:
    """a (N, ...) as the first rows of cap zeroed rows."""
    out = np.zeros((cap,) + a.shape[1:], a.dtype)
    out[: len(a)] = a
    return out


class Context(Transactions):
    """Slots as rows of arrays (slot m is row m of each), the node list, and the
    caches and transaction of one tick. Arrays have a capacity of rows
    (``_grow``); rows < M are slots in use."""

    p: Problem
    M: int                      # slots in use
    nodes: np.ndarray           # (n,) i4 Ray's node list, as slot ids
    # -- what a walk and a score read (kernels/records.py Slots) --------------------
    total: np.ndarray           # (cap, R) f8
    order: np.ndarray           # (cap, R) i4 totals' columns in dict order, -1 padded
    label: np.ndarray           # (cap, Lc) i4 value per label column (raycompat/labelcols.py)
    type: np.ndarray            # (cap,) i4
    status: np.ndarray          # (cap,) i1 Status
    kind: np.ndarray            # (cap,) i1 Kind
    rec: np.ndarray             # (cap,) f8 pick-key tie-breakers from the type (unknown
    prio: np.ndarray            # (cap,) i8   types get Ray's defaults)
    avail: np.ndarray           # (cap,) f8
    # -- termination and idleness -----------------------------------------------------
    idle: np.ndarray            # (cap,) i8 idle milliseconds
    has_ray: np.ndarray         # (cap,) b1
    sched: np.ndarray           # (cap,) i1 Sched
    cause: np.ndarray           # (cap,) i1 Cause of a termination
    cause_value: np.ndarray     # (cap,) i8 the cap or idle time the cause names
    template: np.ndarray        # (cap,) i4 configured type a new slot was made from, -1 none
    # -- per request source (records.Source): demand, then constraint (c...) ----------
    free: np.ndarray            # (cap, R) f8
    present: np.ndarray         # (cap, R) b1
    placed_res: np.ndarray      # (cap, R) b1
    placed_gpu: np.ndarray      # (cap,) b1
    placed_any: np.ndarray      # (cap,) b1
    hist: np.ndarray            # (cap, H) i4
    nhist: np.ndarray           # (cap,) i8
    cfree: np.ndarray
    cpresent: np.ndarray
    cplaced_res: np.ndarray
    cplaced_gpu: np.ndarray
    cplaced_any: np.ndarray
    chist: np.ndarray
    cnhist: np.ndarray
    # -- KubeRay in-place resize per slot (engine/model/ippr.py) ----------------------------
    ippr_attached: np.ndarray   # (cap,) b1
    ippr_resizing: np.ndarray   # (cap,) b1
    ippr_k8s: np.ndarray        # (cap,) i1
    ippr_failed: np.ndarray     # (cap,) b1
    ippr_raylet: np.ndarray     # (cap,) b1
    ippr_cur: np.ndarray        # (cap, 2) f8 cpu, memory
    ippr_desired: np.ndarray    # (cap, 2) f8
    ippr_max: np.ndarray        # (cap, 2) f8
    # -- class caches a changed slot leaves (records.Marks) ---------------------------
    rcls: np.ndarray            # (cap,) i4 strict class of running slots, demand; -2 unknown
    crcls: np.ndarray           # (cap,) i4 the same, constraint
    lcls: np.ndarray            # (cap,) i4 NodeStateCache class, demand; -2 (re)compute
    clcls: np.ndarray           # (cap,) i4 the same, constraint
    ghash: np.ndarray           # (cap,) f8 the gang kernel's key digest; NaN compute
    # -- other per-tick state -----------------------------------------------------------
    private: np.ndarray         # (R,) b1 pseudo columns of one node's private resources
    n_strict: list              # strict class ids used per source
    loose_ids: list             # per source: loose key bytes -> class id
    pristine: dict              # configured type -> its template slot
    rules: Rules
    type_label: np.ndarray      # (T, Lc) i4 a new node's labels, in the context's columns
    shared_label: int           # the column single-gang anti-affinity keys share, -1 none
    _tx: _Transaction | None    # while a transaction is open
    _views: dict                # records over the arrays, remade when they grow

    __slots__ = ("p", "M", "nodes") + ROWS + ("private", "n_strict", "loose_ids",
                                              "pristine", "rules", "_tx", "_views",
                                              "type_label", "shared_label")

    def __init__(self, p: Problem):
        self.p = p
        cap = p.N + _reserve(p)
        self.M = p.N
        self._tx = None
        self._views = {}
        self._init_slots(cap)
        self._init_sources(cap)
        self._init_ippr(cap)
        self.nodes = np.arange(p.N, dtype=IDX)
        # Pseudo columns holding each node's private resources (vecsched.engine.model.build.builder).
        self.private = np.array([n.startswith(PRIVATE_PREFIX) for n in p.resources], bool)
        self._init_classes(cap)
        self.rules = Rules(p.implicit, p.exact, int(p.gpu_col), bool(p.conserve_gpu))
        self._init_templates()

    def _init_slots(self, cap: int) -> None:
        """What a walk and a score read, and the termination rows, for cap slots:
        the Problem's nodes in the first N."""
        p = self.p
        N, R = p.N, p.R
        z = np.zeros
        self.total = z((cap, R), QTY); self.total[:N] = p.node_total
        self.order = np.full((cap, R), -1, IDX); self.order[:N] = p.node_order
        # The label columns of engine/raycompat/labelcols.py: rows past N are
        # written whole when a slot is made (new_slots, copy_slot, a kernel clone),
        # so they are not filled here.
        cols, width, self.shared_label = label_columns(p)
        w = p.node_label.shape[1]
        self.label = np.empty((cap, width), IDX)
        self.label[:N, :w] = p.node_label
        self.label[:N, w:] = -1
        self.type_label = np.full((p.T, width), -1, IDX)
        self.type_label[:, :w] = p.type_label[:, :w]   # types carry node keys only
        self.type = z(cap, IDX); self.type[:N] = p.node_type
        self.template = np.full(cap, -1, IDX)     # config a new slot was made from
        self.status = np.full(cap, Status.NONE, np.int8); self.status[:N] = p.node_status
        self.kind = np.full(cap, Kind.WORKER, np.int8); self.kind[:N] = p.node_kind
        # Tie-breakers of the pick key come from the type; unknown types get Ray's defaults.
        t = p.node_type
        self.prio = z(cap, CNT); self.prio[:N] = p.node_priority
        self.rec = np.ones(cap, QTY); self.rec[:N] = p.type_recoverable[t]
        self.avail = np.ones(cap, QTY); self.avail[:N] = p.type_availability[t]
        self.idle = z(cap, CNT); self.idle[:N] = p.node_idle_ms
        self.has_ray = z(cap, bool); self.has_ray[:N] = p.node_has_ray
        self.sched = np.full(cap, Sched.SCHEDULABLE, np.int8)
        self.cause = z(cap, np.int8)
        self.cause_value = z(cap, CNT)
        self.sched[:N][p.node_outdated] = Sched.TO_TERMINATE
        self.cause[:N][p.node_outdated] = Cause.OUTDATED

    def _init_sources(self, cap: int) -> None:
        """The two request sources' rows: demand starts from each node's free
        resources, the constraint from its totals (every node seen as empty)."""
        p = self.p
        N, R = p.N, p.R
        H = max(1, int((np.diff(p.req.sel_ptr) > 0).sum()))
        z = np.zeros
        self.free, self.cfree = z((cap, R), QTY), z((cap, R), QTY)
        self.present, self.cpresent = z((cap, R), bool), z((cap, R), bool)
        self.placed_res, self.cplaced_res = z((cap, R), bool), z((cap, R), bool)
        self.placed_gpu, self.cplaced_gpu = z(cap, bool), z(cap, bool)
        self.placed_any, self.cplaced_any = z(cap, bool), z(cap, bool)
        self.hist, self.chist = np.full((cap, H), -1, IDX), np.full((cap, H), -1, IDX)
        self.nhist, self.cnhist = z(cap, np.int64), z(cap, np.int64)
        self.free[:N] = p.node_free
        self.present[:N] = p.node_free_present
        tot_present = order_mask(p.node_order, R)
        self.cfree[:N] = np.where(tot_present, p.node_total, 0.0)
        self.cfree[:N][:, p.implicit] = np.where(tot_present[:, p.implicit],
                                                 self.cfree[:N][:, p.implicit], 1.0)
        self.cpresent[:N] = tot_present

    def _init_ippr(self, cap: int) -> None:
        """IPPR state per slot (vecsched.engine.model.ippr)."""
        ip = self.p.node_ippr
        self.ippr_attached = _rows(ip["attached"], cap)
        self.ippr_resizing = _rows(ip["resizing"], cap)
        self.ippr_k8s, self.ippr_failed = _rows(ip["k8s"], cap), _rows(ip["failed"], cap)
        self.ippr_raylet, self.ippr_cur = _rows(ip["raylet"], cap), _rows(ip["cur"], cap)
        self.ippr_desired, self.ippr_max = _rows(ip["desired"], cap), _rows(ip["max"], cap)

    def _init_classes(self, cap: int) -> None:
        """Class caches, all still to compute."""
        # Strict classes of running nodes per source, computed when first needed;
        # a touched slot leaves its class (-1). -2: not computed yet.
        self.rcls = np.full(cap, -2, IDX)
        self.crcls = np.full(cap, -2, IDX)
        self.n_strict = [0, 0]
        # Ray's NodeStateCache class of non-running slots per source, by exact key
        # bytes (content-addressed, so ids stay valid); -2: (re)compute.
        self.lcls = np.full(cap, -2, IDX)
        self.clcls = np.full(cap, -2, IDX)
        # The gang kernel's digest of the same key (NaN: to compute; kernels/gangs.py).
        self.ghash = np.full(cap, np.nan)
        self.loose_ids = [{}, {}]

    def _init_templates(self) -> None:
        """One pristine new node per configured type: the template every launch of
        that type is cloned from (an IPPR group's sized at its max, §4.4)."""
        p = self.p
        self.pristine = {}
        configured = np.flatnonzero(p.type_configured)
        for t, m in zip(configured.tolist(), self.new_slots(configured).tolist()):
            gmax = p.type_ippr_max[t]
            if not np.isnan(gmax[0]):
                from vecsched.engine.model import ippr
                have = [self.total[m, col] if (self.order[m] == col).any() else 0.0
                        for col in (p.col("CPU"), p.col("memory"))]
                ippr.update_totals(self, m, float(max(gmax[0], have[0])),
                                   float(max(gmax[1], have[1])))
            self.pristine[t] = m

    def src(self, s: int) -> Source:
        """The availability and placement arrays of request source s (a record
        made once, and again only after the arrays grow)."""
        v = self._views.get(s)
        if v is None:
            pre = _PREFIX[s]
            v = self._views[s] = Source(*(getattr(self, pre + k) for k in _SRC))
        return v

    def pack_state(self, s: int, rq) -> PackState:
        """What the packing kernels read and write for request source s, with the
        request table of ``rq`` (vecsched.engine.raycompat.requests_view.Requests)."""
        v = self._views.get(("slots",))
        if v is None:
            v = self._views[("slots",)] = (Slots(*(getattr(self, k) for k in Slots._fields)),
                                           Marks(*(getattr(self, k) for k in Marks._fields)))
        return PackState(v[0], self.src(s), v[1], rq.kernel, self.rules)

    def strict_classes(self, source: int, run: np.ndarray, compute) -> np.ndarray:
        """(M,) strict class id per slot for request source ``source`` (-1: alone),
        computing it for the running slots ``run`` that have none yet. Ids of one
        call are their own range, so slots of different calls never share a class
        (they could only be missed twins)."""
        rc = self.rcls if source == DEMAND else self.crcls
        todo = run[rc[run] == -2]
        if todo.size:
            ids = compute(todo)
            base = self.n_strict[source]
            rc[todo] = base + ids
            self.n_strict[source] = base + (int(ids.max()) + 1 if ids.size else 0)
        return rc

    def loose_classes(self, source: int, slots: np.ndarray, keys) -> np.ndarray:
        lc = self.lcls if source == DEMAND else self.clcls
        todo = slots[lc[slots] == -2]
        if todo.size:
            ids = self.loose_ids[source]
            lc[todo] = [ids.setdefault(k, len(ids)) for k in keys(todo)]
        return lc

    def mutable(self) -> tuple:
        """The rows packing can change for an existing slot (what a transaction
        must be able to put back). Type, status, kind, idle time, tie-breakers and
        termination marks are set outside packing and never change inside it."""
        return _MUTABLE

    # ---- slots -----------------------------------------------------------------------
    def _grow(self, need: int) -> None:
        cap = self.type.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        for name in ROWS:
            a = getattr(self, name)
            b = np.empty((new,) + a.shape[1:], a.dtype)
            b[:cap] = a
            b[cap:] = _FILL.get(name, 0)
            setattr(self, name, b)
        self._views = {}

    def new_slots(self, t, k: int = 1, sched: int = Sched.TO_LAUNCH,
                  cap_row=None) -> np.ndarray:
        """k fresh nodes of configured type t, built from its config (kind WORKER);
        t may be an array of types (one node of each, k ignored).
        ``cap_row``: totals to use instead of the config's (IPPR-raised templates)."""
        p = self.p
        ts = np.asarray(t, np.int64)
        ts = np.repeat(ts, k) if ts.ndim == 0 else ts
        k = ts.size
        m0 = self.M
        self._grow(m0 + k)
        sl = slice(m0, m0 + k)
        for name in ROWS:
            getattr(self, name)[sl] = _FILL.get(name, 0)
        total = p.type_cap[ts] if cap_row is None else np.broadcast_to(cap_row[0], (k, p.R))
        order = p.type_order[ts] if cap_row is None else np.broadcast_to(cap_row[1], (k, p.R))
        present = order_mask(order, p.R)
        free = np.where(present, total, np.where(p.implicit, 1.0, 0.0))
        self.total[sl] = total
        self.order[sl] = order
        for pre in _PREFIX:
            getattr(self, pre + "free")[sl] = free
            getattr(self, pre + "present")[sl] = present
        self.label[sl] = self.type_label[ts]
        self.type[sl] = p.type_launch_as[ts]      # the config's name (Ray: key may differ)
        self.template[sl] = ts
        self.prio[sl] = p.type_priority[ts]
        self.rec[sl] = p.type_recoverable[self.type[sl]]
        self.avail[sl] = p.type_availability[self.type[sl]]
        self.sched[sl] = sched
        self.M = m0 + k
        return np.arange(m0, m0 + k, dtype=IDX)

    def copy_slot(self, m: int, k: int) -> np.ndarray:
        """k new slots, each an exact copy of slot m (not in the node list yet)."""
        m0 = self.M
        self._grow(m0 + k)
        for name in ROWS:
            a = getattr(self, name)
            a[m0: m0 + k] = a[m]
        self.M = m0 + k
        return np.arange(m0, m0 + k, dtype=IDX)

    def finish_clones(self, M1: int, tmpl: np.ndarray, source: int) -> None:
        """A kernel filled slots M..M1-1 as clones of ``tmpl`` (committed since) in
        the arrays of ``pack_state(source)``: every other row is its template's,
        and each new slot has changed (no class, no cached digest)."""
        new = slice(self.M, M1)
        done = set(Slots._fields) | set(Marks._fields) | {_PREFIX[source] + k for k in _SRC}
        for name in ROWS:
            if name not in done:
                a = getattr(self, name)
                a[new] = a[tmpl]
        self.rcls[new] = self.crcls[new] = -1
        self.lcls[new] = self.clcls[new] = -2
        self.ghash[new] = np.nan
        self.M = int(M1)

    def save_rows(self, slots: np.ndarray) -> dict:
        saved = {k: getattr(self, k)[slots].copy() for k in ROWS}
        saved["_slots"] = np.asarray(slots).copy()
        return saved

    def load_rows(self, saved: dict, slots: np.ndarray) -> None:
        """Put back the saved rows of ``slots`` (a subset, in any order, of the
        slots given to save_rows)."""
        if not len(slots):
            return
        pos = {int(m): i for i, m in enumerate(saved["_slots"])}
        rows = [pos[int(m)] for m in slots]
        for k, v in saved.items():
            if k != "_slots":
                getattr(self, k)[slots] = v[rows]

    # ---- views -----------------------------------------------------------------------
    def live(self) -> np.ndarray:
        """Slots in the list that are not being terminated."""
        n = self.nodes
        return n[self.sched[n] != Sched.TO_TERMINATE]

    def type_counts(self) -> np.ndarray:
        """(T,) nodes per type that are not being terminated (Ray's cluster shape)."""
        return np.bincount(self.type[self.live()], minlength=self.p.T).astype(CNT)

    def type_available(self) -> np.ndarray:
        """(T,) max_worker_nodes minus every node of the type in the list (§2.1)."""
        p = self.p
        every = np.bincount(self.type[self.nodes], minlength=p.T).astype(CNT)
        return np.where(p.type_configured, p.type_max - every, 0)

    def terminate(self, m: int, cause: int, value: int) -> None:
        self.sched[m] = Sched.TO_TERMINATE
        self.cause[m] = cause
        self.cause_value[m] = value
