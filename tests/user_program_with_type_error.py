"""A user module whose program gt4py rejects when the module is imported (a type error)."""

import gt4py.next as gtx
from gt4py.next import Dims


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
CK = gtx.Field[Dims[Cell, K], gtx.float64]


@gtx.field_operator
def _twice(a: CK) -> CK:
    return a * 2.0


@gtx.program
def wrong_args(a: CK, out: CK, nlev: gtx.int32):
    _twice(nlev, out=out)
