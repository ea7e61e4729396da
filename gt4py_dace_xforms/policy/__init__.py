"""Policy: the one place that decides whether a sound inlining is worth doing."""

from gt4py_dace_xforms.policy.default import Decision, InlinePolicy, InlineWhereSound

__all__ = ["Decision", "InlinePolicy", "InlineWhereSound"]
