"""Transformations: `InlineFuser`, `VerticalWindow`, `WriteBackToMap`, `WriteBackRetarget`,
`OutputAsBuffer`, `InPlaceUpdate`, `NestedColumnRead`, `ProvenCopyChainRemover`, `SweepPairFusion`, `CopyIntoReaders` and the passes
that drive them."""

from gt4py_dace_xforms.transformations.column_reads import NestedColumnRead, gt_narrow_column_reads
from gt4py_dace_xforms.transformations.copy_chain import (
    ProvenCopyChainRemover,
    gt_remove_copy_chains,
)
from gt4py_dace_xforms.transformations.copy_into_readers import (
    CopyIntoReaders,
    gt_copies_into_readers,
)
from gt4py_dace_xforms.transformations.inline_fuser import InlineFuser
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates, gt_inline_fusion
from gt4py_dace_xforms.transformations.inplace_update import InPlaceUpdate, gt_updates_in_place
from gt4py_dace_xforms.transformations.output_buffer import OutputAsBuffer, gt_outputs_as_buffers
from gt4py_dace_xforms.transformations.retarget import WriteBackRetarget, gt_retarget_writebacks
from gt4py_dace_xforms.transformations.sweep_pair import SweepPairFusion, gt_fuse_sweep_pairs
from gt4py_dace_xforms.transformations.vertical_window import VerticalWindow, gt_vertical_windows
from gt4py_dace_xforms.transformations.writeback import WriteBackToMap


__all__ = [
    "CopyIntoReaders",
    "InPlaceUpdate",
    "InlineFuser",
    "NestedColumnRead",
    "OutputAsBuffer",
    "ProvenCopyChainRemover",
    "SweepPairFusion",
    "VerticalWindow",
    "WriteBackRetarget",
    "WriteBackToMap",
    "find_candidates",
    "gt_copies_into_readers",
    "gt_fuse_sweep_pairs",
    "gt_inline_fusion",
    "gt_narrow_column_reads",
    "gt_outputs_as_buffers",
    "gt_remove_copy_chains",
    "gt_retarget_writebacks",
    "gt_updates_in_place",
    "gt_vertical_windows",
]
