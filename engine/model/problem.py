"""Problem: the validated dense arrays of one autoscaler tick.

A Problem is built once at the boundary (see `vecsched.engine.model.build.builder.build_problem`) and
is read-only afterwards. Every array is C-contiguous with the dtype of
`vecsched.engine.model.dtypes`; kernels receive them as they are and never cast or validate.

Index names: n node, t node type, s request run ("shape with a count"),
r resource column, l label key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .errors import ProblemError  # noqa: F401  (re-exported: callers catch it from here)

if TYPE_CHECKING:
    from .requests import RequestTable


def order_mask(order: np.ndarray, R: int) -> np.ndarray:
    """(n, R) bool: the columns each order row lists (its entries >= 0)."""
    mask = np.zeros((order.shape[0], R), bool)
    rows, cols = np.nonzero(order >= 0)
    mask[rows, order[rows, cols]] = True
    return mask


@dataclass(frozen=True, eq=False)
class Problem:
    # --- vocabularies -----------------------------------------------------------
    resources: tuple[str, ...]          # (R,) column names
    implicit: np.ndarray                # (R,) bool: implicit resources (missing means 1.0)
    exact: np.ndarray                   # (R,) bool: column values sit on a dyadic grid,
                                        # so k-fold subtraction equals k single ones
    label_keys: tuple[str, ...]         # (L,)
    label_values: tuple[str, ...]       # value ids used by the label arrays
    gpu_col: int                        # column of "GPU", -1 when absent

    # --- node types (T): configured types first, then types only seen on nodes ----
    type_names: tuple[str, ...]
    type_configured: np.ndarray         # (T,) bool
    type_cap: np.ndarray                # (T, R) f8 config resources (0 where absent)
    type_free: np.ndarray               # (T, R) f8 free resources of a new node: the config,
                                        # 1.0 for an implicit column absent from it
    type_order: np.ndarray              # (T, R) i4 config resource columns in dict order, -1 padded
    type_min: np.ndarray                # (T,) i8 min_worker_nodes
    type_max: np.ndarray                # (T,) i8 max_worker_nodes
    type_priority: np.ndarray           # (T,) i8
    type_idle_timeout_s: np.ndarray     # (T,) f8, NaN = not set
    type_recoverable: np.ndarray        # (T,) f8 recoverable availability (1.0 default)
    type_availability: np.ndarray       # (T,) f8 cloud availability (1.0 default)
    type_label: np.ndarray              # (T, L) i4 label value id, -1 absent
    type_launch_hash: tuple[str, ...]   # (T,)
    type_ippr_max: np.ndarray           # (T, 2) f8 IPPR group max (CPU, memory), NaN = none
    type_launch_as: np.ndarray          # (T,) i4 the type a node made from this config
                                        # carries (itself unless the config's name differs
                                        # from its key); itself for a type with no config

    # --- nodes (N): the instances that become scheduling nodes, in input order ----
    node_source: np.ndarray             # (N,) i4 index into the caller's instance list
    node_type: np.ndarray               # (N,) i4 index into type_names (a pending node:
                                        # its config's launch_as; resources from the config)
    node_priority: np.ndarray           # (N,) i8 priority of the config the node was made
                                        # from (running: its type's; no config: 0)
    node_status: np.ndarray             # (N,) i1 instance status (dtypes.Status)
    node_kind: np.ndarray               # (N,) i1 dtypes.Kind
    node_total: np.ndarray              # (N, R) f8 (0 where absent)
    node_order: np.ndarray              # (N, R) i4 total-resource columns in dict order, -1 padded
    node_free: np.ndarray               # (N, R) f8 available for demand (0 where absent,
                                        # 1.0 for an absent implicit column)
    node_free_present: np.ndarray       # (N, R) bool: column present in the available map
    node_label: np.ndarray              # (N, Ln) i4 label value id, -1 absent, of the
                                        # first Ln <= L label keys: the keys after them
                                        # are named only by placement constraints and
                                        # carried by no node (``node_label_full``)
    node_idle_ms: np.ndarray            # (N,) i8
    node_has_ray: np.ndarray            # (N,) bool: has a ray node id (running ray)
    node_outdated: np.ndarray           # (N,) bool: already terminated as OUTDATED when built
    node_launch_hash: tuple[str, ...]   # (N,)
    node_ippr: dict                     # vecsched.engine.model.ippr.FIELDS -> (N,) / (N, 2) arrays
    node_private: tuple                 # (N,) per node ((name, total), ...) of its private
                                        # resources, held in the PRIVATE_PREFIX columns

    # --- demand: request runs (shape + count), in input order, never expanded ------
    shape_qty: np.ndarray               # (S, R) f8
    shape_present: np.ndarray           # (S, R) bool: key present in the bundle (zero entries too)
    shape_count: np.ndarray             # (S,) i8
    shape_sum: np.ndarray               # (S,) f8 sum of the bundle values in the bundle's own order
    # every request of the tick (plain runs are rows [0, S)), see vecsched.engine.model.requests
    req: "RequestTable"
    con_req: np.ndarray                 # (C,) i4 rows of the request_resources() constraint
    con_count: np.ndarray               # (C,) i8
    has_constraint: bool
    gang_ptr: np.ndarray                # (G+1,) i4 gang -> its bundles in gang_req
    gang_req: np.ndarray                # (B,) i4 row of each gang bundle (shared when equal)
    gang_key: np.ndarray                # (G, 2) i8 Ray's gang sort key
    gang_names: tuple[str, ...]
    pending_idle_timeout_s: float       # NaN = pending nodes are not idle-terminated

    # --- tick-wide settings ------------------------------------------------------------
    max_num_nodes: int                  # -1 = no cap (Ray's None)
    idle_timeout_s: float               # NaN = idle termination off
    disable_launch_config_check: bool
    conserve_gpu: bool                  # AUTOSCALER_CONSERVE_GPU_NODES
    clamped: int = 0                    # available > total entries (quirk Q12: their
                                        # utilisation is clamped at 0 when scored)
    skipped: tuple[tuple[int, str], ...] = field(default=())  # (input index, why) not made nodes
    # Ray's ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES as read this tick:
    # pending statuses idle-terminated without a drain, least advanced first (§5.1)
    pending_terminable: tuple = (1, 3, 4)

    @property
    def relabels(self) -> bool:
        """Some config launches as another configured type (name != key, Ray):
        a new node of it then brings that type's template back, not its own."""
        t = np.arange(self.T)
        return bool((self.type_configured & self.type_configured[self.type_launch_as]
                     & (self.type_launch_as != t)).any())

    @property
    def R(self) -> int:
        return len(self.resources)

    @property
    def T(self) -> int:
        return len(self.type_names)

    @property
    def N(self) -> int:
        return int(self.node_type.shape[0])

    @property
    def S(self) -> int:
        return int(self.shape_count.shape[0])

    @property
    def G(self) -> int:
        return int(self.gang_key.shape[0])

    def node_label_full(self) -> np.ndarray:
        """(N, L) node labels over every label key (the keys past node_label's
        width absent on every node)."""
        L, w = len(self.label_keys), self.node_label.shape[1]
        if w == L:
            return self.node_label
        out = np.full((self.N, L), -1, self.node_label.dtype)
        out[:, :w] = self.node_label
        return out

    def col(self, name: str) -> int:
        try:
            return self.resources.index(name)
        except ValueError:
            return -1
