"""The engine's one error type for bad input."""
from __future__ import annotations


class ProblemError(ValueError):
    """Bad input, named by the field that is wrong (e.g. ``nodes[3].available['CPU']``)."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")
