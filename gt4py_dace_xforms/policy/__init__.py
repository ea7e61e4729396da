"""Policy: the one place that decides whether a sound inlining is worth doing."""

from gt4py_dace_xforms.policy.cost_model import CostModel
from gt4py_dace_xforms.policy.default import Decision, InlineOnly, InlinePolicy, InlineWhereSound


__all__ = ["CostModel", "Decision", "InlineOnly", "InlinePolicy", "InlineWhereSound"]
