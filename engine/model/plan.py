"""Plan: what one tick decided. A plain value; adapters turn it into replies."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .dtypes import Cause, Why


@dataclass(frozen=True, eq=False)
class Plan:
    resources: tuple[str, ...]
    type_names: tuple[str, ...]
    n_nodes: int                        # N of the Problem: slots >= N are new nodes

    launch: np.ndarray                  # (T,) i8 nodes to launch per type
    launch_order: tuple[int, ...]       # types with launches, first-appearance order

    term_node: np.ndarray               # (K,) i4 Problem node index, in reply order
    term_cause: np.ndarray              # (K,) i1 dtypes.Cause
    term_value: np.ndarray              # (K,) i8 the cap (MAX_*), the idle ms (IDLE), 0 (OUTDATED)
    term_status: np.ndarray             # (K,) i1 instance status of the terminated node

    infeasible: np.ndarray              # (S,) i8 units of each input run left unplaced
    infeasible_why: np.ndarray          # (S,) i1 dtypes.Why
    run_order: np.ndarray               # (S,) i4 input runs in the order they were packed

    place_slot: np.ndarray              # (P,) i4 node slot: < n_nodes existing, else new node;
                                        # -1: a node this tick cut before launch (Ray's Q1)
    place_run: np.ndarray               # (P,) i4 input run
    place_count: np.ndarray             # (P,) i8 units of that run placed there
    new_type: np.ndarray                # (J,) i4 type of new node slot n_nodes + j

    cluster_resources: np.ndarray       # (R,) f8 totals over nodes not being terminated
    constraint_infeasible: bool = False  # the request_resources() constraint cannot be met
    gang_infeasible: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # (G,)
    gang_order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))   # (G,)
    gang_why: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    # (G,) dtypes.Why of each infeasible gang (0 for placed ones)
    idle_kept: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    # (k,) Problem nodes idle past their timeout that min_worker_nodes kept
    pending_since: dict = field(default_factory=dict)   # type -> timestamps (§5.1)
    ippr_send: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    # (K,) nodes with an in-place resize to send, in list order (§4.4)
    ippr_queued: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    # (K,) whether this tick queued it (desired = the effective max)
    stats: dict = field(default_factory=dict)
    # (J,) i4 the config new node slot n_nodes + j was made from: its type, unless
    # that config's name differs from its key (Problem.type_launch_as)
    new_template: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    # ---- convenience views (not used on the hot path) -----------------------------
    def launches(self) -> dict[str, int]:
        return {self.type_names[t]: int(self.launch[t]) for t in self.launch_order}

    def terminations(self) -> list[tuple[int, str]]:
        return [(int(n), Cause.NAMES[int(c)]) for n, c in zip(self.term_node, self.term_cause)]

    def infeasible_runs(self) -> dict[int, tuple[int, str]]:
        return {int(s): (int(self.infeasible[s]), Why.NAMES[int(self.infeasible_why[s])])
                for s in np.flatnonzero(self.infeasible)}

    @property
    def n_launched(self) -> int:
        return int(self.launch.sum())

    def summary(self) -> str:
        launches = ", ".join(f"{k}:{v}" for k, v in self.launches().items()) or "none"
        return (f"launch {self.n_launched} ({launches}); terminate {len(self.term_node)}; "
                f"infeasible units {int(self.infeasible.sum())}")
