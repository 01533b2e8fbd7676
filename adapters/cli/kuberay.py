"""``vecsched kuberay-demo --out DIR``: the KubeRay scenario (``scenario.py``) end to end.

A real Ray 2.60 head and worker nodes, the real side-car (``vecsched-monitor
kuberay-autoscaler``, the engine deciding; Ray's scheduler cross-checked every tick),
a Kubernetes API server stand-in and a KubeRay operator stand-in on 127.0.0.1. Writes
``DIR/kuberay.json`` (``replicas_timeline`` per group, ``patches`` as sent,
``conflicts``, ``wrong_group_patches`` (must be 0), ``conflicts_caught``, ...) and
``DIR/kuberay.png`` (replicas, pods and pending demand over time).

``--scenario reorder`` (``adapters/sim/kube/reorder.py``): a GitOps writer reorders the
worker groups between the side-car's read and its patch, during a scale-up and during a
scale-down; every patch must still land on the group it was meant for.

``--scenario duplicate-name`` (``duplicate.py``): a copy of a group with the same name
inserted in front between a read and a patch, then two groups swapping names on
unchanged templates; ``--scenario person-write`` (``person_write.py``): a person lowers
``replicas`` of a group the side-car never wrote. ``wrong_group_patches`` and
``overwrites_unreported`` in ``kuberay.json`` are judged from the API stand-in's own
record (``adapters/sim/kube/wire_audit.py``), every scenario.
"""
from __future__ import annotations

import json
import os
import time


SCENARIOS = ("default", "reorder", "duplicate-name", "person-write")


def register(sub) -> None:
    p = sub.add_parser(
        "kuberay-demo", help="the KubeRay side-car end to end against a Kubernetes API "
                             "stand-in (scale up, ownership conflict, multi-host, scale down)",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="kuberay-out", help="output directory (kuberay-out)")
    p.add_argument("--mode", choices=("engine", "shadow"), default="engine",
                   help="engine: the engine decides, Ray's scheduler is run beside it every "
                        "tick; shadow: Ray decides, the engine beside it (default engine)")
    p.add_argument("--scenario", choices=SCENARIOS, default="default",
                   help="default: scale up, ownership conflict, multi-host, scale down; "
                        "reorder: the groups reordered between a read and a patch, during "
                        "a launch and a terminate; duplicate-name: a same-name copy of a "
                        "group inserted, then two groups swapping names, between a read "
                        "and a patch; person-write: a person lowers replicas of a group "
                        "the side-car never wrote (default default)")
    p.add_argument("--no-guard", action="store_true",
                   help="send Ray's patches unguarded, as main did (to measure "
                        "wrong_group_patches; the reorder scenario's checks then fail)")
    p.add_argument("--keep", action="store_true",
                   help="keep the cluster's work directory (logs) instead of deleting it")
    p.set_defaults(fn=main)


def _n(pods: dict) -> str:
    return ", ".join(f"{g}: {len(v)}" for g, v in (pods or {}).items()) + " pods"


def checks(rec: dict) -> dict:
    """The scenario's verdicts: name -> (ok, detail)."""
    out = {}
    after = rec.get("after_scale_up") or {}
    out["scale-up through a replicas patch"] = (
        after.get("replicas", {}).get("cpu") == 3 and len(after.get("pods", {}).get("cpu", [])) == 3,
        f"replicas {after.get('replicas')}, {_n(after.get('pods'))}")
    gone = [c for c in (rec.get("ledger") or {}).get("conflicts", []) if c["kind"] == "ownership"]
    out["external replicas revert reported"] = (
        bool(gone) and gone[0]["field"] == "spec.workerGroupSpecs[0].replicas",
        f"{gone[0]['field']}: autoscaler wrote {gone[0]['autoscaler_wrote']}, found "
        f"{gone[0]['found']}, writer {gone[0]['writer']}" if gone else None)
    ag = rec.get("after_gitops") or {}
    out["no random pod deletion"] = (len(ag.get("pods", {}).get("cpu", [])) == 3,
                                     _n(ag.get("pods")))
    mh = rec.get("after_multi_host") or {}
    out["numOfHosts 2: one replica, two pods"] = (
        mh.get("replicas", {}).get("pair") == 1 and len(mh.get("pods", {}).get("pair", [])) == 2,
        f"replicas {mh.get('replicas')}, {_n(mh.get('pods'))}")
    fin = rec.get("final") or {}
    out["scale-down to minReplicas"] = (
        len(fin.get("pods", {}).get("cpu", [])) == 1 and not fin.get("pods", {}).get("pair"),
        _n(fin.get("pods")))
    out["stale reads caught"] = (bool((rec.get("ledger") or {}).get("stale_reads")),
                                 len((rec.get("ledger") or {}).get("stale_reads", [])))
    guard = (rec.get("ledger") or {}).get("guard") or {}
    out["wrong_group_patches == 0"] = (guard.get("wrong_group_patches") == 0, guard)
    st = rec.get("stats") or {}
    chk = (rec.get("ledger") or {}).get("ray_check") or {}
    if st.get("mode") == "shadow":
        out["Ray vs engine: 0 differences"] = (
            st.get("shadow_ticks", 0) > 0 and st.get("shadow_diff_ticks") == 0,
            f"{st.get('shadow_ticks')} ticks, {st.get('shadow_diff_ticks')} differ")
    else:
        out["Ray vs engine: 0 differences"] = (
            chk.get("ticks", 0) > 0 and chk.get("diff_ticks") == 0 and not chk.get("errors"),
            f"{chk.get('ticks')} ticks, {chk.get('diff_ticks')} differ")
    return out


def plot(result: dict, path: str) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    for (g, rows), c in zip(result["replicas_timeline"].items(), colors):
        t = [r["t"] for r in rows]
        ax.step(t, [r["replicas"] for r in rows], where="post", color=c, lw=2,
                label=f"{g}: spec replicas")
        ax.step(t, [r["pods"] for r in rows], where="post", color=c, lw=1, ls="--",
                label=f"{g}: live pods")
    d = result["pending_demand_timeline"]
    bx.step([r["t"] for r in d], [r["bundles"] for r in d], where="post", color="tab:purple")
    bx.set_ylabel("pending\nbundles")
    for p in result["patches"]:
        ax.axvline(p["at_s"], color="0.6", lw=0.8, ls=":")
    for c in result["conflicts"]:
        ax.axvline(c["at_s"], color="tab:red", lw=1.2)
        ax.annotate(f"conflict: {c['field']}", (c["at_s"], ax.get_ylim()[1] * 0.92),
                    color="tab:red", fontsize=7)
    for ph in result["phases"]:
        bx.axvline(ph["t"], color="0.8", lw=0.8)
        bx.annotate(ph["name"], (ph["t"], 0), fontsize=7, rotation=90, va="bottom")
    ax.set_ylabel("workers")
    ax.set_title("KubeRay side-car: RayCluster replicas vs pods (dotted: patches sent)")
    ax.legend(fontsize=7, loc="upper right")
    bx.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path)
    return path


def main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from vecsched.engine import warmup

    from vecsched.adapters.sim.kube import duplicate, person_write, reorder, scenario
    from vecsched.adapters.sim.kube.local_cluster import LocalKubeRay

    run, judge = {"reorder": (reorder.run, reorder.checks),
                  "duplicate-name": (duplicate.run, duplicate.checks),
                  "person-write": (person_write.run, person_write.checks)}.get(
        args.scenario, (scenario.run, checks))
    cluster = person_write.person_cluster() if args.scenario == "person-write" \
        else scenario.demo_cluster()

    console = Console()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.monotonic()
    console.print("engine warm-up (numba; the side-car loads the same cache) ...")
    times = {"warmup_s": warmup()}
    kr = LocalKubeRay(cluster, mode=args.mode, ray_check=args.mode == "engine",
                      guard=not args.no_guard)
    rec = None
    try:
        t = time.monotonic()
        kr.start()
        times["cluster_start_s"] = time.monotonic() - t
        console.print(f"cluster up in {times['cluster_start_s']:.1f} s (work dir {kr.dir})")
        t = time.monotonic()
        rec = run(kr, log=console.print, **({"timeout": 45.0} if args.no_guard else {}))
        times["scenario_s"] = time.monotonic() - t
    except Exception as e:
        console.print(f"[red]scenario failed:[/red] {e}")
        return 1
    finally:
        t = time.monotonic()
        kr.stop()
        times["teardown_s"] = time.monotonic() - t
        if not args.keep:
            kr.cleanup()
    result = scenario.result_json(rec)
    result["wall"] = {k: round(v, 2) for k, v in times.items()}
    path = os.path.join(args.out, "kuberay.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    png = plot(result, os.path.join(args.out, "kuberay.png"))
    table = Table(title=f"KubeRay scenario: {args.scenario}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    verdicts = judge(rec)
    for name, (ok, detail) in verdicts.items():
        table.add_row(name, "[green]ok[/green]" if ok else "[red]FAILED[/red]", str(detail))
    console.print(table)
    for p in result["patches"]:
        sent = p.get("sent", p["payload"])
        ops = [o for o in sent if o.get("op") != "test"] if isinstance(sent, list) else sent
        tests = len(sent) - len(ops) if isinstance(sent, list) else 0
        console.print(f"  patch @ {p['at_s']:5.1f} s: {json.dumps(ops)}"
                      + (f" (+{tests} test ops)" if tests else ""))
    console.print(f"from the API stand-in's record: wrong_group_patches "
                  f"{result['wrong_group_patches']}, replicas writes of others overwritten "
                  f"{result['overwrites']}, of which unreported "
                  f"{result['overwrites_unreported']}")
    console.print(f"wrote {path} and {png} ({time.monotonic() - t_start:.0f} s in all: "
                  + ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in result["wall"].items()) + ")")
    return 0 if all(ok for ok, _ in verdicts.values()) else 1

