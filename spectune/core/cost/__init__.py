"""The roofline cost of a forward pass, per component, per GPU (pure NumPy; no I/O)."""

from spectune.core.cost.drafter import draft_cost
from spectune.core.cost.step import ORDER, StepCost, marginal_cost, step_cost

__all__ = ["ORDER", "StepCost", "draft_cost", "marginal_cost", "step_cost"]
