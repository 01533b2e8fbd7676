"""The terms of the bundled traces, for the header of a run that uses one (data/NOTICE
holds the full text: source, terms, citation)."""
from __future__ import annotations

from typing import Optional

_RESEARCH = ("Alibaba clusterdata {src}; research or study use with attribution only "
             "(not an open licence); cite {cite}")
TERMS = {
    "openb_pods.parquet": _RESEARCH.format(
        src="cluster-trace-gpu-v2023", cite="Weng et al., USENIX ATC '23"),
    "openb_gpuspec33_pods.parquet": _RESEARCH.format(
        src="cluster-trace-gpu-v2023", cite="Weng et al., USENIX ATC '23"),
    "openb_nodes.parquet": _RESEARCH.format(
        src="cluster-trace-gpu-v2023", cite="Weng et al., USENIX ATC '23"),
    "spot2026_nodes.parquet": _RESEARCH.format(
        src="cluster-trace-v2026-spot-gpu", cite="Duan et al., ASPLOS '26"),
    "pai2020_nodes.parquet": ("Alibaba clusterdata cluster-trace-gpu-v2020, adapted; "
                              "CC BY 4.0; cite Weng et al., USENIX NSDI '22"),
}


def bundled_files(trace: Optional[str], groups: Optional[str]) -> list[str]:
    """The bundled files a replay of ``trace`` with ``groups`` reads (either may be a
    path of the user's own file, which has no bundled terms)."""
    from vecsched.adapters.traces import BUNDLED, DEFAULT_TRACE, TRACES

    trace = DEFAULT_TRACE if trace is None else trace
    names = []
    if trace in TRACES:
        demand, default_groups = TRACES[trace]
        names += [demand] + ([default_groups] if groups is None else [])
    if groups is not None:
        names.append(groups)
    files = [BUNDLED[n] for n in names if n in BUNDLED]
    return list(dict.fromkeys(files))


def terms_lines(trace: Optional[str], groups: Optional[str]) -> list[str]:
    """One line per terms of the bundled files used: the files and their terms,
    pointing at data/NOTICE."""
    by_terms: dict = {}
    for f in bundled_files(trace, groups):
        by_terms.setdefault(TERMS.get(f, "see data/NOTICE"), []).append(f)
    return [f"data: {', '.join(files)}: {terms} (data/NOTICE)"
            for terms, files in by_terms.items()]
