"""Convert the raw Alibaba trace CSVs into the bundled Parquet files (``data/``).

    python -m vecsched.adapters.traces.build [--raw DIR] [--out DIR]

--raw is the folder of the upstream CSVs as published (data/README.md, "Provenance",
names each file, its repository, commit and SHA-256); it defaults to
``shared/traces/raw`` in the folder that holds the repository. --out defaults to
data/. The raw files are checked against raw/SHA256SUMS (when present) before
conversion, and each output records its source file and SHA-256 in the Parquet schema metadata. Output is
deterministic: re-running with the same pyarrow writes byte-identical files. Every
mapping choice is documented in data/README.md. The worker groups' ``price`` is
ILLUSTRATIVE (``group_prices.py``; the metadata key ``vecsched.price_source`` says so).

Schema version 2 (custom ``resources``, ``app`` / ``max_per_node``): none of the raw
traces converted here has them, so this script writes version-1 demand files for them.
The one version-2 pair it writes is synthetic: ``services_pods`` / ``services_nodes``,
generated from a fixed seed by ``synth_services.py`` (no raw file). A
converter for a trace that has them maps, per request (``mapping.py`` turns the columns
into Ray's terms):

- extra per-request resources (an RDMA NIC share, local disk) -> ``resources``, and the
  same names on the worker groups that offer them (``resources`` of the group table);
- the service / application / deployment a request is an instance of -> ``app``;
- a per-node limit on instances of one app (e.g. ``max_instance_per_node``) ->
  ``max_per_node`` on every row of that app (1..100, Ray Serve's
  ``max_replicas_per_node`` bound); at 1 on the members of a gang (``group_id``) the
  gang is replayed STRICT_SPREAD.
"""
from __future__ import annotations

import argparse
import hashlib
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from . import mapping
from . import parquet
from . import group_prices as prices
from . import schema
from . import synth_services

REPO = Path(__file__).resolve().parents[2]        # the repository root, in a checkout

MIB = 2 ** 20
GIB = 2 ** 30
MIN_DURATION_S = 1.0          # trace times are whole seconds; a 0 s run becomes 1 s
SPOT_GIB_PER_CPU = 8          # the spot node list has no memory column (assumption)

OPENB = "alibaba-gpu-v2023-openb"
PODS = {
    "openb_pods.parquet": f"{OPENB}/openb_pod_list_default.csv",
    "openb_gpuspec33_pods.parquet": f"{OPENB}/openb_pod_list_gpuspec33.csv",
    "openb_cpu250_pods.parquet": f"{OPENB}/openb_pod_list_cpu250.csv",
    "openb_gpushare100_pods.parquet": f"{OPENB}/openb_pod_list_gpushare100.csv",
}
OPENB_NODES = f"{OPENB}/openb_node_list_all_node.csv"
PAI_NODES = "alibaba-pai-v2020-machines/pai_machine_spec.csv"
PAI_HEADER = "alibaba-pai-v2020-machines/pai_machine_spec.header"
SPOT_NODES = "alibaba-spot-v2026-nodes/node_info_df.csv"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(raw: Path, rel: str) -> str:
    """SHA-256 of raw/rel, checked against raw/SHA256SUMS when that file exists."""
    digest = sha256(raw / rel)
    sums = raw / "SHA256SUMS"
    if sums.is_file():
        known = dict(reversed(line.split(None, 1)) for line in sums.read_text().splitlines()
                     if line.strip())
        known = {k.strip(): v for k, v in known.items()}
        if rel in known and known[rel] != digest:
            raise SystemExit(f"{rel}: SHA-256 {digest} does not match SHA256SUMS {known[rel]}")
    return digest


def read_csv(path: Path, types: dict, names=None) -> dict:
    opts = pacsv.ReadOptions(column_names=names) if names else pacsv.ReadOptions()
    conv = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True)
    return pacsv.read_csv(str(path), read_options=opts, convert_options=conv).to_pydict()


def source_meta(rel: str, digest: str, **extra) -> dict:
    return {"vecsched.source": rel, "vecsched.source_sha256": digest, **extra}


# ---- pods -> demand --------------------------------------------------------------------
def convert_pods(raw: Path, rel: str) -> tuple[pa.Table, dict]:
    s, i = pa.string(), pa.int64()
    d = read_csv(raw / rel, {
        "name": s, "cpu_milli": i, "memory_mib": i, "num_gpu": i, "gpu_milli": i,
        "gpu_spec": s, "qos": s, "pod_phase": s, "creation_time": i, "deletion_time": i,
        "scheduled_time": i})
    num_gpu = np.asarray(d["num_gpu"], dtype=np.int64)
    gpu_milli = np.asarray(d["gpu_milli"], dtype=np.int64)
    created = np.asarray(d["creation_time"], dtype=np.int64)
    deleted = np.asarray(d["deletion_time"], dtype=np.int64)
    sched = np.array([-1 if v is None else v for v in d["scheduled_time"]], dtype=np.int64)
    scheduled = np.array([v is not None for v in d["scheduled_time"]])
    run = np.where(scheduled, deleted - sched, deleted - created).astype(np.float64)
    short = run <= 0
    table = pa.table({
        "arrival_s": pa.array(created, pa.int64()),
        "duration_s": np.where(short, MIN_DURATION_S, run),
        "cpu": np.asarray(d["cpu_milli"], dtype=np.float64) / 1000.0,
        "memory": np.asarray(d["memory_mib"], dtype=np.float64) * MIB,
        "gpu": np.where(num_gpu == 1, gpu_milli / 1000.0, num_gpu.astype(np.float64)),
        "gpu_spec": pa.array(d["gpu_spec"], pa.string()),
        "group_id": pa.nulls(len(created), pa.string()),
        "qos": pa.array(d["qos"], pa.string()),
        "name": pa.array(d["name"], pa.string()),
    })
    stats = {
        "rows": len(created),
        "never_scheduled": int((~scheduled).sum()),
        "min_duration_applied": int(short.sum()),
        "min_duration_pods": [d["name"][k] for k in np.flatnonzero(short)],
        "gpu_spec_rows": sum(v is not None for v in d["gpu_spec"]),
        "or_lists": mapping.or_list_count(table),
    }
    return table, stats


# ---- node lists -> worker groups -------------------------------------------------------
def slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def type_name(model, cpu_milli: int, memory_mib: int, gpu: int) -> str:
    """Readable, stable type name, e.g. g2-96c-384g-8gpu or cpu-32c-256g."""
    cpu = f"{cpu_milli // 1000}c" if cpu_milli % 1000 == 0 else f"{cpu_milli}mc"
    mem = f"{memory_mib // 1024}g" if memory_mib % 1024 == 0 else f"{memory_mib}m"
    if model is None:
        return f"cpu-{cpu}-{mem}" + (f"-{gpu}gpu" if gpu else "")
    return f"{slug(model)}-{cpu}-{mem}-{gpu}gpu"


def groups_table(keys: Counter) -> tuple[pa.Table, dict]:
    """keys: Counter of (model or None, cpu_milli, memory_mib, gpu) -> node count.
    Rows sorted by type name (a stable order, independent of counts)."""
    rows = []
    for (model, cpu_milli, memory_mib, gpu), count in keys.items():
        rows.append({
            "type": type_name(model, cpu_milli, memory_mib, gpu),
            "cpu": cpu_milli / 1000.0,
            "memory": float(memory_mib * MIB),
            "gpu": float(gpu),
            "gpu_model": model,
            "labels": {schema.ACCELERATOR_LABEL: model} if model else {},
            "min_workers": 0,
            "max_workers": count,
            "price": prices.illustrative_price(cpu_milli / 1000.0, float(memory_mib * MIB),
                                               float(gpu), model),
        })
    rows.sort(key=lambda r: r["type"])
    names = [r["type"] for r in rows]
    if len(set(names)) != len(names):
        raise SystemExit(f"type names collide: {sorted(n for n in names if names.count(n) > 1)}")
    stats = {"types": len(rows), "nodes": sum(keys.values())}
    return pa.Table.from_pylist(rows, schema=schema.WORKER_GROUP_SCHEMA), stats


def convert_openb_nodes(raw: Path) -> tuple[pa.Table, dict]:
    i = pa.int64()
    d = read_csv(raw / OPENB_NODES, {"sn": pa.string(), "cpu_milli": i, "memory_mib": i,
                                     "gpu": i, "model": pa.string()})
    return groups_table(Counter(zip(d["model"], d["cpu_milli"], d["memory_mib"], d["gpu"])))


def convert_pai_nodes(raw: Path) -> tuple[pa.Table, dict]:
    names = (raw / PAI_HEADER).read_text().strip().split(",")
    i = pa.int64()
    d = read_csv(raw / PAI_NODES, {"machine": pa.string(), "gpu_type": pa.string(),
                                   "cap_cpu": i, "cap_mem": i, "cap_gpu": i}, names=names)
    # gpu_type "CPU" marks CPU-only machines; cap_mem is read as GiB.
    models = [None if (t == "CPU" and g == 0) else t for t, g in zip(d["gpu_type"], d["cap_gpu"])]
    keys = Counter(zip(models, (c * 1000 for c in d["cap_cpu"]),
                       (m * 1024 for m in d["cap_mem"]), d["cap_gpu"]))
    return groups_table(keys)


def convert_spot_nodes(raw: Path) -> tuple[pa.Table, dict]:
    i = pa.int64()
    d = read_csv(raw / SPOT_NODES, {"gpu_model": pa.string(), "gpu_capacity_num": i,
                                    "cpu_num": i, "node_name": i})
    keys = Counter(zip(d["gpu_model"], (c * 1000 for c in d["cpu_num"]),
                       (c * SPOT_GIB_PER_CPU * 1024 for c in d["cpu_num"]),
                       d["gpu_capacity_num"]))
    return groups_table(keys)


# the services family's files: demand spec -> (demand file, worker-group file or None
# when it replays on another spec's groups)
SERVICES_FILES = (
    (synth_services.SERVICES, "services_pods.parquet", "services_nodes.parquet"),
    (synth_services.MIXGPU, "services_mixgpu_pods.parquet", "services_mixgpu_nodes.parquet"),
    (synth_services.DAILY, "services_daily_pods.parquet", None),
)


def write_services(out: Path) -> None:
    """The seeded synthetic services workloads (``synth_services.py``): demand and
    groups of each of the family."""
    for spec, pods, nodes in SERVICES_FILES:
        meta = {"vecsched.source": "synthetic: vecsched.adapters.traces.synth_services",
                "vecsched.seed": str(synth_services.SEED)}
        if spec is not synth_services.SERVICES:      # the first file's metadata as it was
            meta["vecsched.spec"] = spec.name
        table = parquet.write_demand(synth_services.demand(synth_services.SEED, spec),
                                     out / pods, metadata=meta)
        print(f"{pods}: {{'rows': {table.num_rows}}}")
        if nodes:
            parquet.write_worker_groups(synth_services.worker_groups(spec), out / nodes,
                                        metadata={**meta, "vecsched.price_source": prices.SOURCE})
            print(f"{nodes}: {{'types': {len(spec.groups)}}}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--raw", type=Path, default=REPO.parent / "shared" / "traces" / "raw",
                    help="directory of the raw CSVs (default: shared/traces/raw beside the repository)")
    ap.add_argument("--out", type=Path, default=parquet.DATA_DIR,
                    help="output directory (default: data/, the bundled package data)")
    args = ap.parse_args(argv)
    raw, out = args.raw.resolve(), args.out
    if not raw.is_dir():
        raise SystemExit(f"raw trace directory {raw} does not exist (pass --raw DIR)")

    for fname, rel in PODS.items():
        table, stats = convert_pods(raw, rel)
        meta = source_meta(rel, verify(raw, rel), **{
            "vecsched.min_duration_s": repr(MIN_DURATION_S),
            "vecsched.min_duration_applied": str(stats["min_duration_applied"])})
        parquet.write_demand(table, out / fname, metadata=meta)
        print(f"{fname}: {stats}")

    jobs = (
        ("openb_nodes.parquet", OPENB_NODES, convert_openb_nodes, {}),
        ("pai2020_nodes.parquet", PAI_NODES, convert_pai_nodes,
         {"vecsched.memory_unit": "cap_mem read as GiB"}),
        ("spot2026_nodes.parquet", SPOT_NODES, convert_spot_nodes,
         {"vecsched.memory_assumed": f"{SPOT_GIB_PER_CPU} GiB per CPU (no memory in source)"}),
    )
    for fname, rel, convert, extra in jobs:
        table, stats = convert(raw)
        extra = {**extra, "vecsched.price_source": prices.SOURCE}
        parquet.write_worker_groups(table, out / fname,
                                   metadata=source_meta(rel, verify(raw, rel), **extra))
        print(f"{fname}: {stats}")
    write_services(out)
    for f in sorted(out.glob("*.parquet")):
        print(f"{f.name}: {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
