"""One autoscaler replica's logic: act only as the leader, record before acting.

A leader's tick at world tick w (`Autoscaler.step`):

1. **Read** the world (cluster view, the cloud's instance list). A replica that was
   just promoted, or whose last write failed, first claims its epoch at the cloud
   (`claim`: from then on the cloud refuses every older epoch, so the list it reads
   next is final for them; a refusal tells it the cloud's fence, and it steps down
   to be granted an epoch above it), and with `claim_store` (a lease kept outside the
   store's Redis, e.g. a Kubernetes Lease) raises the store's fence to its epoch
   too (`FencedStorage.claim`: older writers are refused from then on), then reloads
   the instance records from Redis
   (`FencedInstanceTable.load`): the state it goes on from is what the previous
   leader recorded. If the records are gone or older than the world (a Redis that
   restarted empty, or from an old snapshot: no `#meta`, or a recorded tick below
   the world's last), it **rebuilds** them from the cloud's own instance list
   (`cloud_rebuild.py`) and records them with this tick.
2. **Decide and record** (only if tick w is not recorded yet): sync the records with
   what the cloud reports, run the reconciler's steps on the in-memory store
   (`InstanceStore.reconcile` with the scheduler), then write every changed record
   and `tick_done = w` in one fenced batch. A write rejected by the fence (a newer
   leader exists) raises `FencedOut`; a version conflict means someone else wrote:
   the cache is dropped either way.
3. **Act**, level-triggered from the recorded state: launch every REQUESTED record the
   cloud has no instance for (the idempotency key is the record's instance id and
   launch request id), drain every RAY_STOP_REQUESTED node still running, terminate
   every TERMINATING instance not yet going. A new leader that finds tick w recorded
   but its calls unmade (the old leader died in between) makes them: nothing a dead
   leader recorded is lost, and nothing is launched twice.
4. **Advance** the world to w + 1.

Cloud calls carry the token's epoch and holder id (the world refuses an epoch it has
seen from another holder). Every write and every cloud call is preceded by
`lease.token()`, which raises `NotLeader` once the lease is not valid by this
replica's clock: a passive replica never writes and never calls the cloud. `hook(point, tick, **info)` is called right
before and after the record write (`prewrite`, `postwrite`): the demo and the tests
use it to pause or kill a replica at exactly that point.
"""
from __future__ import annotations

from collections.abc import Callable

from vecsched.engine.model.build.builder import NodeSpec, RequestSpec
from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.leader import FencedOut, Lease
from vecsched.adapters.sim.ha.instance_table import FencedInstanceTable, Loaded
from vecsched.adapters.sim.lifecycle import InstanceStore, Move, ReconcileConfig

from .cloud_rebuild import rebuild_from_cloud, record_head

from .replay_link import TickState

S = Status


class VersionConflict(Exception):
    """The table changed since this replica read it: reload before acting."""


class WorldMismatch(Exception):
    """The recorded tick is ahead of the world's (a state the protocol excludes)."""


class CloudRefused(FencedOut):
    """The world refused a call: its fence has seen a newer epoch."""

    def __init__(self, epoch: int, fence: int):
        super().__init__("stale", epoch, fence, -1, None)


def _moved_ids(moves) -> list[str]:
    return [m.instance_id for m in moves]


class Autoscaler:
    """The replica's autoscaler (module docstring). `world` has `call(op, *args)`."""

    def __init__(self, name: str, lease: Lease, table: FencedInstanceTable, world,
                 scheduler, hook: Callable[..., None] | None = None, *,
                 claim_store: bool = False):
        self.name = name
        self.claim_store = claim_store
        self.lease = lease
        self.table = table
        self.world = world
        self.sched = scheduler
        self.hook = hook or (lambda point, tick, **info: None)
        hello = world.call("hello")
        cfg = hello["config"]
        self.types = hello["types"]
        self.head_type = hello["head_type"]
        self.idle_timeout_s = cfg["idle_timeout_s"]
        self.max_num_nodes = cfg["max_num_nodes"]
        self.rc = ReconcileConfig(max_concurrent_launches=cfg["max_concurrent_launches"],
                                  upscaling_speed=float(cfg["upscaling_speed"]))
        self.now_ns = 0
        self.loaded: Loaded | None = None
        self.loaded_epoch = 0
        self.rebuilds: list[dict] = []  # one entry per rebuild from the cloud's list
        self.counts = {"ticks": 0, "recorded": 0, "reloads": 0, "passive_reads": 0,
                       "claims": 0, "rebuilds": 0,
                       "launch_calls": 0, "launch_replayed": 0, "drain_calls": 0,
                       "terminate_calls": 0, "writes": 0}

    # ---- state -------------------------------------------------------------------------
    def _clock(self) -> int:
        return self.now_ns

    def reload(self, epoch: int) -> Loaded:
        self.loaded = self.table.load(self._clock, self.rc)
        self.loaded_epoch = epoch
        self.counts["reloads"] += 1
        return self.loaded

    def drop(self) -> None:
        """Forget the cached state (after a failed or refused write)."""
        self.loaded = None
        self.loaded_epoch = 0

    def passive_read(self) -> int:
        """A passive replica's read of the records (never a write); returns how many."""
        loaded = self.table.load(self._clock, self.rc)
        self.counts["passive_reads"] += 1
        return len(loaded.store)

    # ---- one leader step ---------------------------------------------------------------
    def step(self) -> str:
        """One tick as the leader: 'ticked', or 'end' when the run is over."""
        tok = self.lease.token()
        if self.loaded is None or self.loaded_epoch != tok.epoch:
            self._call("claim")
            if self.claim_store:
                self.table.storage.claim(tok.epoch)
            self.counts["claims"] += 1
            self.reload(tok.epoch)
        view = self.world.call("view", self.name)
        w = view["tick"]
        if w >= view["end"]:
            return "end"
        self.now_ns = int(view["now_ns"])
        done = self.loaded.meta.get("tick_done", -1)
        if done > w:
            raise WorldMismatch(f"recorded tick {done}, world at tick {w}")
        if done < w - 1:                 # records lost, or older than the world
            self._rebuild(view, w, done)
            done = w - 1
        if done == w - 1:
            self._decide_and_record(view, w)
        self._act(view)
        tok = self.lease.token()
        res = self.world.call("advance", tok.epoch, tok.holder, w)
        if not res["ok"]:
            if res["why"] == "stale":
                raise CloudRefused(tok.epoch, res["fence"])
            raise WorldMismatch(f"advance from tick {w} refused: world at {res['tick']}")
        self.counts["ticks"] += 1
        return "ticked"

    def _rebuild(self, view: dict, w: int, done: int) -> None:
        """Replace the loaded records by the ones the cloud's list implies; the next
        commit writes them all and deletes every stored entry not among them."""
        old = self.loaded
        store = InstanceStore(self._clock, old.ids, self.rc, request_id_factory=old.requests)
        created = rebuild_from_cloud(view["cloud"], store, self.head_type, old.ids,
                                     old.requests)
        self.table.replace(old, store)
        self.counts["rebuilds"] += 1
        self.rebuilds.append({"tick": w, "recorded_tick": done, "records": len(created),
                              "dropped": len(old.drop)})

    def _decide_and_record(self, view: dict, w: int) -> None:
        store = self.loaded.store
        changed: list[str] = []
        if w == 0 and "head" not in store:
            # The head runs from t=0 (the world's cluster has it): record it once.
            changed += record_head(store, self.head_type)
        changed += self._sync(view)
        tm = store.reconcile(self._scheduler(view))
        for moves in (tm.timeouts, tm.plan, tm.terminations, tm.launches):
            changed += _moved_ids(moves)
        requested = sum(1 for m in tm.launches if m.to_status == S.REQUESTED)
        tok = self.lease.token()
        self.hook("prewrite", w, requested=requested)
        self.counts["writes"] += 1
        status = self.table.commit(self.loaded, changed, {"tick_done": w}, token=tok)
        if not status.success:
            raise VersionConflict(f"table at version {status.version}, "
                                  f"read at {self.loaded.version}")
        self.counts["recorded"] += 1
        self.hook("postwrite", w, requested=requested, version=status.version,
                  in_flight=store.count(S.REQUESTED), queued=store.count(S.QUEUED))

    # ---- reconciling with what the cloud reports ---------------------------------------
    def _sync(self, view: dict) -> list[str]:
        """Moves the cloud's instance list implies (Ray's reconciler sync), each stamped
        with the simulated time it happened."""
        store = self.loaded.store
        by_key = {(c["instance_id"], c["request_id"]): c for c in view["cloud"]}
        by_id = {c["cloud_id"]: c for c in view["cloud"]}
        changed = []
        for rec in store:
            while True:
                c = (by_key.get((rec.instance_id, rec.launch_request_id))
                     if rec.status == S.REQUESTED else by_id.get(rec.cloud_instance_id))
                move = None if c is None else _next_move(rec, c)
                if move is None:
                    break
                move, at = move
                store.apply([move], at_ns=at)
                changed.append(rec.instance_id)
        return changed

    def _scheduler(self, view: dict):
        def schedule(store):
            nodes, ids = [], []
            for rec in store:
                if rec.status not in S.SCHEDULABLE:
                    continue
                ns = NodeSpec(rec.instance_type, status=rec.status, kind=rec.node_kind)
                seen = view["nodes"].get(rec.instance_id)
                if rec.status == S.RAY_RUNNING and seen is not None:
                    ns.total, ns.available, ns.idle_ms = seen
                    ns.ray_node_id = rec.node_id
                nodes.append(ns)
                ids.append(rec.instance_id)
            requests = [RequestSpec(dict(shape), n) for shape, n in view["pending"]]
            state = TickState(self.types, nodes, ids, requests, self.idle_timeout_s,
                              self.max_num_nodes)
            decision = self.sched.decide(state)
            return decision.launches, decision.terminations
        return schedule

    # ---- acting on the recorded state --------------------------------------------------
    def _call(self, op: str, *args) -> dict:
        tok = self.lease.token()
        res = self.world.call(op, tok.epoch, tok.holder, *args)
        if not res["ok"] and res.get("why") == "stale":
            raise CloudRefused(tok.epoch, res["fence"])
        return res

    def _act(self, view: dict) -> None:
        keys = {(c["instance_id"], c["request_id"]) for c in view["cloud"]}
        state = {c["cloud_id"]: c["state"] for c in view["cloud"]}
        for rec in self.loaded.store:
            if rec.status == S.REQUESTED and \
                    (rec.instance_id, rec.launch_request_id) not in keys:
                res = self._call("launch", rec.instance_id, rec.launch_request_id,
                                 rec.instance_type)
                self.counts["launch_calls"] += 1
                self.counts["launch_replayed"] += bool(res.get("replayed"))
            elif rec.status == S.RAY_STOP_REQUESTED and \
                    state.get(rec.cloud_instance_id) == "running":
                self._call("drain", rec.cloud_instance_id)
                self.counts["drain_calls"] += 1
            elif rec.status == S.TERMINATING and \
                    state.get(rec.cloud_instance_id) not in ("terminating", "terminated"):
                self._call("terminate", rec.cloud_instance_id)
                self.counts["terminate_calls"] += 1


def _next_move(rec, c: dict):
    """(Move, at_ns) the cloud instance `c` implies for `rec` next, or None."""
    st, t = c["state"], c["times"]
    reached = {s for s in t}
    s = rec.status
    if s == S.REQUESTED and "allocated" in reached:
        return Move(rec.instance_id, S.ALLOCATED, cloud_instance_id=c["cloud_id"],
                    node_kind=Kind.WORKER), t["allocated"]
    if s == S.ALLOCATED:
        if st == "terminated":
            return Move(rec.instance_id, S.TERMINATED), t["terminated"]
        if "running" in reached and st in ("running", "stopping", "stopped"):
            return Move(rec.instance_id, S.RAY_RUNNING,
                        node_id=rec.node_id or f"node-{c['cloud_id']}"), t["running"]
    if s in (S.RAY_RUNNING, S.RAY_STOP_REQUESTED) and st in ("stopping", "stopped"):
        return Move(rec.instance_id, S.RAY_STOPPING), t["stopping"]
    if s == S.RAY_STOPPING and st == "stopped":
        return Move(rec.instance_id, S.RAY_STOPPED), t["stopped"]
    if s == S.TERMINATING and st == "terminated":
        return Move(rec.instance_id, S.TERMINATED), t["terminated"]
    return None
