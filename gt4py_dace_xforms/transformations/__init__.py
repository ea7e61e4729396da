"""Transformations and the passes that drive them.

Transformations (DaCe pattern matches, listed by `SDFGOptimizer` and the VS Code viewer):
`InlineFuser`, `VerticalWindow`, `WriteBackToMap`, `WriteBackRetarget`, `OutputAsBuffer`,
`InPlaceUpdate`, `NestedColumnRead`, `ProvenCopyChainRemover`, `SweepPairFusion`,
`CopyIntoReaders`.

Passes (`gt_<verb>_...`, as gt4py names its own): each takes the SDFG, keyword-only
`policy=` where a policy decides, `names=` where the pass can be limited to some arrays,
and `validate=True`, and returns an `InlineReport`.
"""

from gt4py_dace_xforms.transformations.column_reads import NestedColumnRead, gt_narrow_column_reads
from gt4py_dace_xforms.transformations.copy_chain import (
    ProvenCopyChainRemover,
    gt_remove_copy_chains,
)
from gt4py_dace_xforms.transformations.copy_into_readers import (
    CopyIntoReaders,
    gt_copy_into_readers,
)
from gt4py_dace_xforms.transformations.inline_fuser import InlineFuser
from gt4py_dace_xforms.transformations.inline_fusion_pass import (
    find_candidates,
    gt_inline_intermediates,
)
from gt4py_dace_xforms.transformations.inplace_update import InPlaceUpdate, gt_update_in_place
from gt4py_dace_xforms.transformations.merge_fragments import gt_merge_split_fragments
from gt4py_dace_xforms.transformations.output_buffer import (
    OutputAsBuffer,
    gt_use_outputs_as_buffers,
)
from gt4py_dace_xforms.transformations.retarget import WriteBackRetarget, gt_retarget_writebacks
from gt4py_dace_xforms.transformations.sibling_tail import gt_split_sibling_tails
from gt4py_dace_xforms.transformations.split_hazards import gt_trim_split_hazards
from gt4py_dace_xforms.transformations.sweep_pair import SweepPairFusion, gt_fuse_sweep_pairs
from gt4py_dace_xforms.transformations.vertical_window import (
    VerticalWindow,
    gt_apply_vertical_windows,
)
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
    "gt_apply_vertical_windows",
    "gt_copy_into_readers",
    "gt_fuse_sweep_pairs",
    "gt_inline_intermediates",
    "gt_merge_split_fragments",
    "gt_narrow_column_reads",
    "gt_remove_copy_chains",
    "gt_retarget_writebacks",
    "gt_split_sibling_tails",
    "gt_trim_split_hazards",
    "gt_update_in_place",
    "gt_use_outputs_as_buffers",
]
