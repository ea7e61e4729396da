"""Small gt4py programs as a user would write them, importable as `user_programs:NAME`
(tests put this folder on `sys.path`) for `gt4py-dace-xforms explain`."""

import gt4py.next as gtx
from gt4py.next import Dims, neighbor_sum
from gt4py.next.ffront.experimental import concat_where


Cell = gtx.Dimension("Cell")
Edge = gtx.Dimension("Edge")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
C2EDim = gtx.Dimension("C2E", kind=gtx.DimensionKind.LOCAL)
C2E = gtx.FieldOffset("C2E", source=Edge, target=(Cell, C2EDim))
CK = gtx.Field[Dims[Cell, K], gtx.float64]
EK = gtx.Field[Dims[Edge, K], gtx.float64]


@gtx.field_operator
def _shifted_sum(a: CK, b: CK) -> CK:
    t = a * 2.0 + b
    return t + t(K + 1)


@gtx.program
def shifted_sum(a: CK, b: CK, out: CK, nlev: gtx.int32):
    _shifted_sum(a, b, out=out, domain={Cell: (0, 64), K: (0, nlev - 1)})


@gtx.field_operator
def _edge_sum(e: EK) -> CK:
    return neighbor_sum(e(C2E), axis=C2EDim)


@gtx.program
def edge_sum(e: EK, out: CK):
    _edge_sum(e, out=out)


CellField = gtx.Field[Dims[Cell], gtx.float64]


@gtx.field_operator
def _cell_only_branch(b: CK, c: CellField) -> CK:
    t = concat_where(K < 1, c, b)
    return t(K + 1) - t


@gtx.program
def cell_only_branch(b: CK, c: CellField, out: CK):
    # Static domain: gt4py then reads t(K + 1) from `b` directly and leaves the concat
    # node, copied from the 1-D `c`, to its replacement, which raises IndexError in gt4py
    # 1.2.3 (concat_where_mapper.py `_replace_single_read`), stock backend too.
    _cell_only_branch(b, c, out=out, domain={Cell: (0, 16), K: (0, 11)})


#: A grid that has no table for C2E.
EMPTY_GRID: dict = {}


def ring_grid(n_cells: int = 8) -> dict:
    """Cell i's three edges are i, i + 1, i + 2 (mod n): enough for lowering and running."""
    import numpy as np

    table = (np.arange(n_cells)[:, None] + np.arange(3)[None, :]) % n_cells
    return {"C2E": gtx.as_connectivity([Cell, C2EDim], Edge, table.astype(gtx.IndexType))}
