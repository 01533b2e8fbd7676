"""The HA demo: autoscaler replicas (active / passive, `vecsched.adapters.leader`) on a shared
simulated world, with a leader killed and a leader paused (`vecsched ha-demo`).

    world.py        the simulated cloud + cluster + clock, with its own record
    world_server.py the world's own process, and its clients
    autoscaler.py   one replica's tick: record, then act; only as the leader
    replica.py      a replica process (events out, commands in)
    procs.py        child processes of a run
    demo.py         the orchestration and the reference run
    report.py       ha.json, from the world's record and the store's audit
    replay_link.py  the only import of replay code
"""
