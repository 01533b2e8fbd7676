"""The instances of one replay, counted twice and checked: from the instance store's
records (what Ray's instance manager holds) and from the simulated cloud's own record
(``SimCloud.by_type``: what the cloud was asked for and what it gave).

Worker instances only: the head runs from t=0 and is never launched. Per worker group:

- **decided**: records the scheduler's launches created (QUEUED), from the store; must
  equal the launches the replay saw applied (``Metrics.applied``).
- **requested**: launch calls the cloud received (a record retried after a request
  timeout is requested again), from the cloud.
- **allocated**: cloud instances the cloud allocated, from the cloud; must equal the
  records that entered ALLOCATED.
- **failed**: launch calls that errored (launch error or stock-out), from the cloud.
- **lost** (never answered), **orphaned** (allocated after Ray gave up on the
  request) and **in flight** at the end (accepted, not allocated yet), from the cloud.
- **running**: records whose ray node joined (entered RAY_RUNNING), from the store;
  at most allocated.
- **never launched**: records never REQUESTED, from the store: **cancelled** while
  QUEUED (a scale-down before any launch call) or **still queued** at the end.
- **unsent**: REQUESTED entries of the last tick, which the cloud would see at the next
  one (the replay ends first).

Identities, asserted at the end of every replay (``AccountingError`` otherwise):

    requested = allocated + failed + lost + orphaned + in flight         (the cloud)
    REQUESTED entries in the store = requested + unsent               (store = cloud)
    decided = launched (records REQUESTED at least once) + never launched
    records that entered ALLOCATED = allocated                         (store = cloud)
    running <= allocated;  ALLOCATION_FAILED records = failed when nothing was lost
    or orphaned (else >=: Ray's retry limit fails records too)
"""
from __future__ import annotations

from vecsched.engine.model.dtypes import Status

S = Status
_FIELDS = ("decided", "requested", "allocated", "failed", "lost", "orphaned", "in_flight",
           "unsent", "running", "launched", "never_launched", "cancelled", "still_queued")


class AccountingError(AssertionError):
    """The store's and the cloud's records disagree (a replay or lifecycle bug)."""


def _zero() -> dict:
    return dict.fromkeys(_FIELDS, 0)


def count_instances(store, cloud, applied_by_type: dict, end_ns: int,
                    head_ids=("head",)) -> dict:
    """``{"total": {field: n}, "by_type": {type: {field: n}}}`` (fields in the module
    docstring), after checking the identities."""
    by: dict[str, dict] = {}
    requested_entries: dict[str, int] = {}
    entered_allocated: dict[str, int] = {}
    alloc_failed: dict[str, int] = {}
    for rec in store:
        if rec.instance_id in head_ids:
            continue
        t = rec.instance_type
        c = by.setdefault(t, _zero())
        hist = rec.status_history
        if not hist or hist[0][0] != S.QUEUED:
            raise AccountingError(f"{rec.instance_id}: a worker record not created QUEUED")
        c["decided"] += 1
        req = [ts for s, ts in hist if s == S.REQUESTED]
        requested_entries[t] = requested_entries.get(t, 0) + len(req)
        c["unsent"] += sum(1 for ts in req if ts == end_ns)
        if req:
            c["launched"] += 1
        else:
            c["never_launched"] += 1
            if rec.status == S.QUEUED:
                c["still_queued"] += 1
            else:
                c["cancelled"] += 1
        statuses = {s for s, _ in hist}
        if S.ALLOCATED in statuses:
            entered_allocated[t] = entered_allocated.get(t, 0) + 1
        if S.RAY_RUNNING in statuses:
            c["running"] += 1
        if rec.status == S.ALLOCATION_FAILED:
            alloc_failed[t] = alloc_failed.get(t, 0) + 1
    for t, o in cloud.by_type().items():
        c = by.setdefault(t, _zero())
        c["requested"] = o["accepted"] + o["failed"] + o["stockout"] + o["lost"]
        c["allocated"] = o["allocated"]
        c["failed"] = o["failed"] + o["stockout"]
        c["lost"] = o["lost"]
        c["orphaned"] = o["orphaned"]
        c["in_flight"] = o["in_flight"]
    for t, c in by.items():
        _check(t, c, requested_entries.get(t, 0), entered_allocated.get(t, 0),
               alloc_failed.get(t, 0), int(applied_by_type.get(t, 0)))
    extra = set(applied_by_type) - set(by)
    if extra:
        raise AccountingError(f"launches applied for {sorted(extra)} but no records")
    total = _zero()
    for c in by.values():
        for k in _FIELDS:
            total[k] += c[k]
    return {"total": total, "by_type": dict(sorted(by.items()))}


def _check(t: str, c: dict, requested_entries: int, entered_allocated: int,
           alloc_failed: int, applied: int) -> None:
    def fail(what: str) -> None:
        raise AccountingError(f"instance accounting, worker group {t}: {what} ({c})")
    if c["requested"] != (c["allocated"] + c["failed"] + c["lost"] + c["orphaned"]
                          + c["in_flight"]):
        fail("requested != allocated + failed + lost + orphaned + in flight")
    if requested_entries != c["requested"] + c["unsent"]:
        fail(f"{requested_entries} REQUESTED entries in the store != requested + unsent")
    if c["decided"] != c["launched"] + c["never_launched"] or \
            c["never_launched"] != c["cancelled"] + c["still_queued"]:
        fail("decided != launched + never launched (cancelled + still queued)")
    if c["decided"] != applied:
        fail(f"{applied} launches applied != {c['decided']} records created QUEUED")
    if entered_allocated != c["allocated"]:
        fail(f"{entered_allocated} records entered ALLOCATED != {c['allocated']} allocated")
    if c["running"] > c["allocated"]:
        fail("more records ran ray than the cloud allocated")
    if c["lost"] == 0 and c["orphaned"] == 0 and alloc_failed != c["failed"]:
        fail(f"{alloc_failed} ALLOCATION_FAILED records != {c['failed']} failed launch calls")
    if alloc_failed < c["failed"]:
        fail(f"{alloc_failed} ALLOCATION_FAILED records < {c['failed']} failed launch calls")


def identity_line(total: dict) -> str:
    """The checked identities with this replay's numbers, for the report."""
    c = total
    extra = [f"{c[k]} {k.replace('_', ' ')}" for k in ("lost", "orphaned", "in_flight")
             if c[k]]
    unsent = f" (+ {c['unsent']} requested at the last tick, unsent)" if c["unsent"] else ""
    return (f"requested {c['requested']} = allocated {c['allocated']} + failed {c['failed']}"
            + "".join(f" + {e}" for e in extra) + unsent
            + f"; decided {c['decided']} = launched {c['launched']} + never launched "
              f"{c['never_launched']} ({c['cancelled']} cancelled while queued, "
              f"{c['still_queued']} still queued at the end); running {c['running']} "
              f"<= allocated")
