"""gt4py_dace_xforms: DaCe SDFG transformations for GT4Py.

Importing the package registers `InlineFuser`, `VerticalWindow`, `WriteBackToMap`,
`WriteBackRetarget`, `OutputAsBuffer`, `NestedColumnRead`, `SweepPairFusion`,
`InPlaceUpdate`, `CopyIntoReaders` and `ProvenCopyChainRemover` with DaCe's pattern
matcher, so that `SDFGOptimizer` (and the DaCe VS Code viewer) list them. The `gt_*` passes
take `policy=`, `names=` and `validate=True` alike and return an `InlineReport`.
Backends: `gt4py_dace_xforms.backends`.
"""

from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.integration.install import install, uninstall
from gt4py_dace_xforms.policy import CostModel, Decision, InlinePolicy, InlineWhereSound
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations import (
    CopyIntoReaders,
    InlineFuser,
    InPlaceUpdate,
    NestedColumnRead,
    OutputAsBuffer,
    ProvenCopyChainRemover,
    SweepPairFusion,
    VerticalWindow,
    WriteBackRetarget,
    WriteBackToMap,
    gt_apply_vertical_windows,
    gt_copy_into_readers,
    gt_fuse_sweep_pairs,
    gt_inline_intermediates,
    gt_merge_split_fragments,
    gt_narrow_column_reads,
    gt_remove_copy_chains,
    gt_retarget_writebacks,
    gt_split_sibling_tails,
    gt_trim_split_hazards,
    gt_update_in_place,
    gt_use_outputs_as_buffers,
)


__all__ = [
    "CopyIntoReaders",
    "CostModel",
    "Decision",
    "InPlaceUpdate",
    "InlineFuser",
    "InlinePolicy",
    "InlineRecord",
    "InlineReport",
    "InlineWhereSound",
    "NestedColumnRead",
    "OutputAsBuffer",
    "ProvenCopyChainRemover",
    "SweepPairFusion",
    "VerticalWindow",
    "WriteBackRetarget",
    "WriteBackToMap",
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
    "install",
    "optimization_hooks",
    "uninstall",
]
from gt4py_dace_xforms.version import __version__  # noqa: E402
