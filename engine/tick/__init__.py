"""The engine's seam: one policy interface and registry (``policy``), and what every
policy shares around it: limits on totals (``limits``), the availability memory
(``availability``), the reasons demand stays unplaced (``reasons``), the fixed
phases' rules (``fixed``) and the tick that runs a policy through them (``seam``).
"""
from .availability import AvailabilityMemory, AvailabilityOptions, live_counts
from .limits import COST, Limits
from .policy import POLICIES, Policy, TickInputs, get, register
from .seam import run

__all__ = ["AvailabilityMemory", "AvailabilityOptions", "COST", "Limits", "POLICIES", "Policy",
           "TickInputs", "get", "live_counts", "register", "run"]
