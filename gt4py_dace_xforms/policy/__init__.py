"""Policy: the one place that decides whether a sound inlining is worth doing."""

from gt4py_dace_xforms.policy.default import Decision, InlinePolicy, InlineWhereSound

__all__ = ["CostModel", "Decision", "InlinePolicy", "InlineWhereSound"]


def __getattr__(name):  # the cost model imports the analysis layer; load it on demand
    if name == "CostModel":
        from gt4py_dace_xforms.policy.cost_model import CostModel

        return CostModel
    raise AttributeError(name)
