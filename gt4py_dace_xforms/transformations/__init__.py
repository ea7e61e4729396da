"""Transformations: the `InlineFuser` and the pass that drives it."""

from gt4py_dace_xforms.transformations.inline_fuser import InlineFuser
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates, gt_inline_fusion

__all__ = ["InlineFuser", "find_candidates", "gt_inline_fusion"]
