"""Dtypes, enum codes and sentinels of the engine, in one place.

The integer codes of instance statuses, node kinds and termination causes are
the protobuf enum values Ray uses (`instance_manager.proto`), so adapters can
pass them through without a table; the engine itself never imports Ray.
"""
import numpy as np

QTY = np.float64      # resource quantities (Ray uses Python floats: binary64)
IDX = np.int32        # node / type / shape / column indices
CNT = np.int64        # request counts, node counts, idle milliseconds
CODE = np.int8        # small enum codes

NONE = -1             # "absent" for index arrays (no label value, no type, padding)

IMPLICIT_PREFIX = "node:__internal_implicit_resource_"
PRIVATE_PREFIX = "<private>:"     # pseudo columns for resources only one node names
GPU = "GPU"


class Status:
    """Instance-manager statuses (values of Ray's `Instance.InstanceStatus`)."""
    NONE = -1                 # a node the engine itself adds (TO_LAUNCH); Ray's None
    UNKNOWN = 0
    QUEUED = 1
    REQUESTED = 2
    ALLOCATED = 3
    RAY_INSTALLING = 4
    RAY_RUNNING = 5
    RAY_STOP_REQUESTED = 6
    RAY_STOPPING = 7
    RAY_STOPPED = 8
    TERMINATING = 9
    TERMINATED = 10
    ALLOCATION_FAILED = 11
    RAY_INSTALL_FAILED = 12
    TERMINATION_FAILED = 13
    ALLOCATION_TIMEOUT = 14

    # Statuses from which RAY_RUNNING is still reachable: only these become nodes.
    SCHEDULABLE = (QUEUED, REQUESTED, ALLOCATED, RAY_INSTALLING, RAY_RUNNING,
                   RAY_STOP_REQUESTED)
    # Never named in a termination: the instance manager has no legal move from
    # these to the reconciler's termination targets, so Ray's reply would make it
    # reject the whole tick (quirk Q13 and its RAY_STOP_REQUESTED twin).
    UNTERMINABLE = (REQUESTED, RAY_STOP_REQUESTED)
    # Pending statuses that can be dropped without a drain (REQUESTED cannot be
    # cancelled while the cloud call is in flight).
    PENDING_TERMINABLE = (QUEUED, ALLOCATED, RAY_INSTALLING)

    NAMES = {
        -1: "NONE", 0: "UNKNOWN", 1: "QUEUED", 2: "REQUESTED", 3: "ALLOCATED",
        4: "RAY_INSTALLING", 5: "RAY_RUNNING", 6: "RAY_STOP_REQUESTED",
        7: "RAY_STOPPING", 8: "RAY_STOPPED", 9: "TERMINATING", 10: "TERMINATED",
        11: "ALLOCATION_FAILED", 12: "RAY_INSTALL_FAILED",
        13: "TERMINATION_FAILED", 14: "ALLOCATION_TIMEOUT",
    }


class Kind:
    """Node kinds (Ray's `NodeKind`)."""
    UNMANAGED = 0
    HEAD = 1
    WORKER = 2


class Cause:
    """Termination causes (Ray's `TerminationRequest.Cause`), and the efficient
    mode's own CONSOLIDATE (opt-in, ``vecsched.engine.efficient.consolidate``), which Ray's
    enum has no value for: ``adapters/ray/codec.py`` sends it to Ray as OUTDATED
    with details saying why."""
    IDLE = 1
    MAX_NUM_NODE_PER_TYPE = 2
    MAX_NUM_NODES = 3
    OUTDATED = 4
    CONSOLIDATE = 5

    NAMES = {1: "IDLE", 2: "MAX_NUM_NODE_PER_TYPE", 3: "MAX_NUM_NODES", 4: "OUTDATED",
             5: "CONSOLIDATE"}


class Sched:
    """A scheduling node's status inside one tick."""
    SCHEDULABLE = 0
    TO_LAUNCH = 1
    TO_TERMINATE = 2


class Why:
    """Why demand could not be placed (a reason per infeasible request run)."""
    NONE = 0                  # placed in full
    NO_NODE_TYPE_FITS = 1     # no configured node type could ever hold one unit
    MAX_WORKERS = 2           # fits a type, but every such type is at max_worker_nodes
    MAX_NUM_NODES = 3         # fits a type, but the global max_num_nodes is reached
    NO_LABEL_MATCH = 4        # a type has room for it, but none matches its label selector
    LIMIT = 5                 # a type that fits had room, but launching it would exceed a
                              # limit on a total (vecsched.engine.tick.limits)
    UNAVAILABLE = 6           # every type that fits and had room is held out after the
                              # cloud refused it (vecsched.engine.tick.availability)

    NAMES = {0: "placed", 1: "no node type fits", 2: "blocked by max_worker_nodes",
             3: "blocked by max_num_nodes", 4: "no node type matches its label selector",
             5: "held back by a limit", 6: "every fitting worker group is out of stock"}
