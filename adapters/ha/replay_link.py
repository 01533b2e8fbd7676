"""Every name the HA demo takes from the trace replay, in one place.

The replay is being reorganised; this is the only module of `adapters/ha/` (and of
`adapters/leader/`) that imports replay code, so re-pointing these imports is all a
move of the replay needs.
"""
from adapters.replay_cluster import Cluster
from adapters.replay_sched import Decision, TickState, make
from adapters.replay_trace import HEAD_TYPE, LoadedTrace, Window, load

__all__ = ["Cluster", "Decision", "HEAD_TYPE", "LoadedTrace", "TickState", "Window", "load",
           "make"]
