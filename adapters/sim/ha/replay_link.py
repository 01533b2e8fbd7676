"""Every name the HA demo takes from the trace replay, in one place.

This is the only module of `adapters/sim/ha/` (and nothing in `adapters/leader/`) that imports
replay code, so a move of the replay needs only these imports re-pointed.
"""
from vecsched.adapters.replay.cluster import Cluster
from vecsched.adapters.replay.registry import make
from vecsched.adapters.replay.schedulers import Decision, TickState
from vecsched.adapters.replay.trace import HEAD_TYPE, LoadedTrace, Window, load

__all__ = ["Cluster", "Decision", "HEAD_TYPE", "LoadedTrace", "TickState", "Window", "load",
           "make"]
