"""The HA demo: autoscaler replicas (active / passive, `vecsched.adapters.leader`) on a shared
simulated world, with a leader killed and a leader paused, or Redis restarted empty
(`vecsched ha-demo [--scenario kill-pause|redis-restart|redis-old-snapshot] [--backend redis|kube]`).

    world.py          the simulated cloud + cluster + clock, with its own record and fence
    world_server.py   the world's own process, and its clients
    replica_tick.py   one replica's tick: claim, record, then act; only as the leader
    instance_table.py the instance records in the fenced Redis table
    cloud_rebuild.py  the records rebuilt from the cloud's instance list
    replica.py        a replica process (events out, commands in)
    lease_site.py     the lease backend a replica's config names (Redis key or
                      Kubernetes Lease) and what the fenced store must do about it
    kube_lease_api.py the Kubernetes API stand-in holding the demo's Lease
    procs.py          child processes of a run
    run.py            the orchestration (kill-pause) and the reference run
    run_restart.py    the redis-restart orchestration
    run_report.py     ha.json, from the world's record and the store's audit
    replay_link.py    the only import of replay code
"""
