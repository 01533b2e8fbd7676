"""vecsched engine: arrays in, plan out. No I/O, no Ray import, no wall clock."""
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem, ProblemError
from .schedule import MODES, schedule
from .warmup import warmup

__all__ = ["schedule", "warmup", "build_problem", "Problem", "ProblemError", "Plan",
           "NodeSpec", "NodeTypeSpec", "RequestSpec", "MODES"]
