"""What gt4py's own later stages of `gt_auto_optimize` can compute on an SDFG. Pure.

gt4py's split fusion (`gt_vertical_map_split_fusion`, `gt_horizontal_map_split_fusion`)
splits two Maps at the bounds of their overlap. It compares those bounds with Python's
`<`, and sympy can answer `0 > Max(0, nc)` (False) but not `0 < Max(0, nc)`: for a Map over
`Max(0, nc):32` (a `concat_where(Cell >= nc, ...)` branch with `nc` a run-time argument)
beside one over `0:32`, `split_overlapping_map_range` raises a `TypeError` instead of
declining (issue 60). gt4py never has such a pair next to each other in its own pipeline
for the programs tried; the library's folds and inlines can put them there.
"""

from __future__ import annotations

from dace.sdfg import nodes as dn
from gt4py.next.program_processors.runners.dace.transformations import map_fusion_utils as gtx_mfutils


def split_range_computable(first: dn.Map, second: dn.Map) -> bool:
    """Whether gt4py's `split_overlapping_map_range(first, second)` answers (a split, or
    None for "no split") rather than raising on bounds it cannot compare."""
    try:
        gtx_mfutils.split_overlapping_map_range(first, second)
    except Exception:  # noqa: BLE001  # TypeError from sympy's Relational.__bool__, or anything else
        return False
    return True
