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


@gtx.field_operator
def _edge_difference_of_product(a: CK, b: CK) -> EK:
    t = a * b
    return t(E2C[1]) - t(E2C[0])


@gtx.program
def edge_difference_of_product(a: CK, b: CK, out: EK):
    _edge_difference_of_product(a, b, out=out)


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


def edge_difference_of_product_numpy(a, b, table):
    t = a * b
    return t[table[:, 1]] - t[table[:, 0]]


def edge_sum_numpy(a, b, table):
    t = 2.0 * a + b
    return t[table[:, 0]] + t[table[:, 1]]


def split_producers(sdfg, pieces: int = 3) -> None:
    """Split every top-level Map over cells writing a 2-D transient that a Map over edges
    reads into `pieces` Maps along its first dimension, each a copy of the whole scope over its own range, the way gt4py leaves a
    Map it split at zone bounds (`apply_divergence_damping_and_update_vn`'s `gtir_tmp_58`);
    the pieces' own transients are renamed per piece, as gt4py's Map fusion names them.
    A `gt_auto_optimize` hook (module-level, so that gt4py's worker processes unpickle it)."""
    import copy as _copy

    from dace.sdfg import nodes as dn
    from dace.sdfg.propagation import propagate_memlets_state

    for state in list(sdfg.states()):
        scopes = state.scope_dict()
        for exit_ in [n for n in state.nodes() if isinstance(n, dn.MapExit)]:
            entry = state.entry_node(exit_)
            outs = state.out_edges(exit_)
            if scopes.get(entry) is not None or len(outs) != 1:
                continue
            if not entry.map.params[0].startswith("i_Cell") or not any(
                isinstance(e.dst, dn.MapEntry) and e.dst.map.params[0].startswith("i_Edge")
                for e in state.out_edges(outs[0].dst)
            ):
                continue
            node = outs[0].dst
            desc = sdfg.arrays[node.data]
            if not desc.transient or len(desc.shape) != 2:
                continue
            lo, hi, _ = entry.map.range[0]
            cuts = [lo + (hi + 1 - lo) * i // pieces for i in range(pieces + 1)]
            scope = state.scope_subgraph(entry)
            nodes, edges = list(scope.nodes()), list(scope.edges())
            outer_in = list(state.in_edges(entry))
            local = {
                n.data
                for n in nodes
                if isinstance(n, dn.AccessNode) and sdfg.arrays[n.data].transient
            }
            for p in range(1, pieces):
                twins = dict(zip(nodes, _copy.deepcopy(nodes)))
                renamed = {}
                for name in sorted(local):
                    new = f"{name}_piece{p}"
                    sdfg.add_datadesc(new, _copy.deepcopy(sdfg.arrays[name]))
                    renamed[name] = new
                for new in twins.values():
                    if isinstance(new, dn.AccessNode) and new.data in renamed:
                        new.data = renamed[new.data]
                    state.add_node(new)
                for e in edges:
                    memlet = _copy.deepcopy(e.data)
                    if memlet.data in renamed:
                        memlet.data = renamed[memlet.data]
                    state.add_edge(twins[e.src], e.src_conn, twins[e.dst], e.dst_conn, memlet)
                for e in outer_in:
                    state.add_edge(
                        e.src, e.src_conn, twins[entry], e.dst_conn, _copy.deepcopy(e.data)
                    )
                state.add_edge(
                    twins[exit_],
                    outs[0].src_conn,
                    node,
                    outs[0].dst_conn,
                    _copy.deepcopy(outs[0].data),
                )
                twins[entry].map.range[0] = (cuts[p], cuts[p + 1] - 1, 1)
                twins[entry].map.label = f"{entry.map.label}_piece{p}"
            entry.map.range[0] = (cuts[0], cuts[1] - 1, 1)
        propagate_memlets_state(sdfg, state)
