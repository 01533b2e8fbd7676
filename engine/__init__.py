"""vecsched engine: arrays in, plan out. No I/O, no Ray import, no wall clock."""
from .build import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from .plan import Plan
from .problem import Problem, ProblemError
from .schedule import MODES, schedule
from .warmup import warmup

__all__ = ["schedule", "warmup", "build_problem", "Problem", "ProblemError", "Plan",
           "NodeSpec", "NodeTypeSpec", "RequestSpec", "MODES"]
