"""asv benchmarks of the CP-SAT cross-check (vecsched.engine.solver), by bundle count.

Ticks: ``tests/kits/ganggen.py:gang_tick`` (seeded, append-only: placement groups of
2-8 bundles with mixed strategies on six Ray-like worker groups). Setup builds
the model and the efficient mode's plan (the solver's hint, as in
``bench/cross_check.py``); ``CrossCheck.time_solve`` times one solve (one worker,
seed 0, at most 5 deterministic seconds: the 200-bundle tick of seed 0 hits it,
about 10 s, unproven). ``CrossCheckQuality`` records quality beside speed
(docs/design.md §6 item 10) up to 100 bundles: the gap of ray-compat's and the
efficient mode's plans to the solver's proven bound, and whether the optimum
was proven (the smoke run stays short).
"""
from __future__ import annotations

from vecsched.engine import schedule
from vecsched.engine.solver import assignment_of_plan, build_instance, cross_check_plan, solve
from tests.kits.ganggen import gang_tick

_LIMIT = 5.0


class CrossCheck:
    params = ([25, 50, 100, 200],)
    param_names = ["bundles"]
    timeout = 300

    def setup(self, bundles):
        self.problem = gang_tick(0, bundles=bundles)
        self.inst = build_instance(self.problem)
        self.eff = schedule(self.problem, mode="efficient")
        self.hint = assignment_of_plan(self.inst, self.eff, self.eff.stats["gang_place"])

    def time_solve(self, bundles):
        solve(self.inst, hint=self.hint, deterministic_limit=_LIMIT)


class CrossCheckQuality:
    params = ([25, 50, 100],)
    param_names = ["bundles"]
    timeout = 300

    def setup(self, bundles):
        CrossCheck.setup(self, bundles)
        self.res = solve(self.inst, hint=self.hint, deterministic_limit=_LIMIT)

    def track_gap_ray_compat(self, bundles):
        return float(cross_check_plan(self.inst, schedule(self.problem), self.res).gap)

    def track_gap_efficient(self, bundles):
        return float(cross_check_plan(self.inst, self.eff, self.res,
                                      gang_place=self.eff.stats["gang_place"]).gap)

    def track_proven_optimal(self, bundles):
        return int(self.res.optimal)
