"""Transformations: `InlineFuser`, `WriteBackToMap` and the pass that drives them."""

from gt4py_dace_xforms.transformations.inline_fuser import InlineFuser
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates, gt_inline_fusion
from gt4py_dace_xforms.transformations.writeback import WriteBackToMap

__all__ = ["InlineFuser", "WriteBackToMap", "find_candidates", "gt_inline_fusion"]
