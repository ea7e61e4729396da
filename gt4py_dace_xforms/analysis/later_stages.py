"""What gt4py's own later stages of `gt_auto_optimize` can compute on an SDFG. Pure.

gt4py's split fusion (`gt_vertical_map_split_fusion`, `gt_horizontal_map_split_fusion`)
splits two Maps at the bounds of their overlap. It compares those bounds with Python's
`<`, and sympy can answer `0 > Max(0, nc)` (False) but not `0 < Max(0, nc)`: for a Map over
`Max(0, nc):32` (a `concat_where(Cell >= nc, ...)` branch with `nc` a run-time argument)
beside one over `0:32`, `split_overlapping_map_range` raises a `TypeError` instead of
declining (issue 60). gt4py never has such a pair next to each other in its own pipeline
for the programs tried; the library's folds and inlines can put them there. Its
`MapSplitter` fails the same way on a Map written in full and read in part at such a bound
(`splitter_failures`).
"""

from __future__ import annotations

import copy

import dace
import networkx as nx
import sympy
from dace.sdfg import nodes as dn, propagation
from gt4py.next.program_processors.runners.dace.transformations import (
    map_fusion_utils as gtx_mfutils,
)


def split_range_computable(first: dn.Map, second: dn.Map) -> bool:
    """Whether gt4py's `split_overlapping_map_range(first, second)` answers (a split, or
    None for "no split") rather than raising on bounds it cannot compare.

    Args:
        first: a Map.
        second: another Map.

    Returns:
        True where gt4py's function would not raise.
    """
    try:
        gtx_mfutils.split_overlapping_map_range(first, second)
    except Exception:  # noqa: BLE001  # TypeError from sympy's Relational.__bool__, or anything else
        return False
    return True


def splitter_failures(sdfg: dace.SDFG) -> list[tuple[str, str, dace.subsets.Range]]:
    """Where gt4py's `MapSplitter` would match and then fail: (state label, transient, the
    part its one reader reads) for each Map that writes all of a single-use transient read
    in part at bounds `decompose_subset` cannot split (`Max(0, nc):32` of `0:32`), whose
    `apply` asserts (issue 60: two scans split at `nc`, one given its input inlined, the
    other narrowed to its column). Judged as gt4py judges it: on a copy with the memlets
    propagated, as `gt_auto_optimize` propagates them right before the splitter.

    Args:
        sdfg: the SDFG.

    Returns:
        `(state label, transient, read range)` per failing match.
    """
    from dace.sdfg import utils as sdutils
    from dace.transformation.passes.pattern_matching import match_patterns
    from gt4py.next.program_processors.runners.dace.transformations import (
        map_splitter,
        splitting_tools,
    )

    if not _maybe_splitter_shape(sdfg):
        return []
    found = []
    try:
        work = copy.deepcopy(sdfg)
        sdutils.canonicalize_memlet_trees(work)
        propagation.propagate_memlets_sdfg(work)
        for match in match_patterns(work, [map_splitter.MapSplitter], permissive=False):
            state = work.cfg_list[match.cfg_id].node(match.state_id)
            node = match.access_node
            write, read = next(iter(state.in_edges(node))), next(iter(state.out_edges(node)))
            produced = write.data.get_dst_subset(write, state)
            consumed = read.data.get_src_subset(read, state)
            parts = splitting_tools.decompose_subset(consumer=produced, producer=consumed)
            if parts is None or len(parts) <= 1:
                found.append((state.label, node.data, consumed))
    except Exception:  # noqa: BLE001  # not judged: nothing reported
        return []
    return found


def _maybe_splitter_shape(sdfg: dace.SDFG) -> bool:
    """A cheap necessary condition for `splitter_failures` (so that it copies nothing in
    most builds): a top-level Map writes a transient that one Map reads, and one of the two
    Maps has a `Max`/`Min` bound (gt4py's form of a run-time bound; static builds have
    none), where their ranges differ."""
    for state in sdfg.states():
        for node in state.data_nodes():
            if (
                state.in_degree(node) != 1
                or state.out_degree(node) != 1
                or not node.desc(sdfg).transient
            ):
                continue
            write, read = state.in_edges(node)[0], state.out_edges(node)[0]
            if not isinstance(write.src, dn.MapExit) or not isinstance(read.dst, dn.MapEntry):
                continue
            writer, reader = write.src.map.range, read.dst.map.range
            if writer == reader:
                continue
            for rng in (writer, reader):
                for r in rng.ranges:
                    if any(
                        getattr(x, "atoms", None) and x.atoms(sympy.Max, sympy.Min) for x in r[:2]
                    ):
                        return True
    return False


def fused_beside(
    state: dace.SDFGState,
    writer: dn.MapEntry,
    consumer: dn.MapEntry,
    shared: set[str],
    cut: str,
) -> bool:
    """Whether gt4py's horizontal Map fusion (`MapFusionHorizontal`, or its split fusion
    where the ranges only overlap) will run `consumer` in one Map with `writer` once the
    consumer's reads of `cut` are gone (inlined): then a load the consumer's copies repeat
    of a field the writer also loads comes in the same iteration, from cache.

    gt4py fuses any two top-level Maps of one state that are parallel (neither reachable
    from the other) with the same parameters, ranges that are equal or split at their
    overlap (`split_overlapping_map_range`), and, for the split, a common input; with
    `only_if_common_ancestor=False`, nothing more is asked. (Ranges that differ are fused
    only by the split fusion, which `gt_auto_optimize(disable_splitting=True)` skips;
    icon4py and gt4py's backends leave it on.)

    Args:
        state: the state of both Maps.
        writer: entry of a top-level Map that stays (it writes other data too).
        consumer: entry of the reader's top-level Map.
        shared: data both will load once the copies are in (the writer's inputs the
            copies read); empty: nothing in common, no split fusion.
        cut: the intermediate whose edges into the consumer the rewrite removes.

    Returns:
        True only where all of the above holds; False where anything is unknown.
    """
    try:
        if not shared or writer not in state.nodes() or consumer not in state.nodes():
            return False
        sd = state.scope_dict()
        if sd[writer] is not None or sd[consumer] is not None:
            return False
        a, b = writer.map, consumer.map
        if set(a.params) != set(b.params) or a.schedule != b.schedule:
            return False
        if a.range != b.range and gtx_mfutils.split_overlapping_map_range(a, b) is None:
            return False
        return not (
            _reaches(state, state.exit_node(writer), consumer, cut)
            or _reaches(state, state.exit_node(consumer), writer, cut)
        )
    except Exception:  # noqa: BLE001  # unknown: the reload is charged
        return False


def _reaches(state: dace.SDFGState, start: dn.Node, goal: dn.Node, cut: str) -> bool:
    """Whether `goal` is reachable from `start`, without the edges from AccessNodes of
    `cut` into `goal` (the reads the rewrite removes)."""
    view = nx.subgraph_view(
        state.nx,
        filter_edge=lambda u, v, *_: (
            not (v is goal and isinstance(u, dn.AccessNode) and u.data == cut)
        ),
    )
    return nx.has_path(view, start, goal)
