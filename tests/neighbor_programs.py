"""Small gt4py programs that read temporaries through a neighbor table (E2C), Cell x K inputs."""

import gt4py.next as gtx
import numpy as np
from gt4py.next import neighbor_sum


Cell = gtx.Dimension("Cell")
Edge = gtx.Dimension("Edge")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
E2CDim = gtx.Dimension("E2C", kind=gtx.DimensionKind.LOCAL)
E2C = gtx.FieldOffset("E2C", source=Cell, target=(Edge, E2CDim))
CK = gtx.Field[gtx.Dims[Cell, K], gtx.float64]
EK = gtx.Field[gtx.Dims[Edge, K], gtx.float64]


@gtx.field_operator
def _edge_difference(a: CK, b: CK) -> EK:
    t = a * 2.0 + b
    return t(E2C[1]) - t(E2C[0])


@gtx.program
def edge_difference(a: CK, b: CK, out: EK):
    _edge_difference(a, b, out=out)


@gtx.field_operator
def _edge_sum(a: CK, b: CK) -> EK:
    t = a * 2.0 + b
    return neighbor_sum(t(E2C), axis=E2CDim)


@gtx.program
def edge_sum(a: CK, b: CK, out: EK):
    _edge_sum(a, b, out=out)


@gtx.field_operator
def _edge_difference_and_shift(a: CK, b: CK) -> EK:
    t = a * 2.0 + b
    u = t(K + 1) - t
    return u(E2C[1]) + u(E2C[0])


@gtx.program
def edge_difference_and_shift(a: CK, b: CK, out: EK, nlev: gtx.int32):
    _edge_difference_and_shift(a, b, out=out, domain={Edge: (0, 12), K: (0, nlev - 1)})


def inputs(
    n_cells: int = 8, n_edges: int = 12, n_levels: int = 6, seed: int = 0
) -> tuple[dict, dict]:
    """Random fields, an in-range E2C table, a zero output; and the offset provider."""
    rng = np.random.default_rng(seed)
    table = rng.integers(0, n_cells, size=(n_edges, 2), dtype=np.int32)
    args = {
        "a": gtx.as_field([Cell, K], rng.random((n_cells, n_levels))),
        "b": gtx.as_field([Cell, K], rng.random((n_cells, n_levels))),
        "out": gtx.as_field([Edge, K], np.zeros((n_edges, n_levels))),
    }
    return args, {"E2C": gtx.as_connectivity([Edge, E2CDim], Cell, table)}


def edge_difference_numpy(a, b, table):
    t = 2.0 * a + b
    return t[table[:, 1]] - t[table[:, 0]]


def edge_sum_numpy(a, b, table):
    t = 2.0 * a + b
    return t[table[:, 0]] + t[table[:, 1]]
