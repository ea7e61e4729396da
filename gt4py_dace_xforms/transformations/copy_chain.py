"""`ProvenCopyChainRemover`: gt4py's `CopyChainRemover`, with the coverage it asks for
proven over every value of the symbols (analysis/copy_cover.py; docs/copy_chains.md).

gt4py lowers a nested `concat_where` to chains of copies between temporaries: a branch
is computed into its own array and copied into the concat node, which is copied into the
next one, and the last into the output. Its `CopyChainRemover` folds such a pair
`A1 -> A2` into one array when the copy moves all of `A1` (`PULL`: `A1`'s writers write
`A2` at the copy's offset) or writes all of `A2` (`PUSH`: `A2`'s readers read `A1`). It
asks `Range.covers`, which cannot compare `Max(0, ve - Max(1, vs))` elements with a copy
over `[0 : Max(1, vs, ve) - Max(1, vs)]` without knowing `vs <= ve` (its own TODO), so on
icon4py the chains stay: `compute_wgtfac_c` keeps 10 two-dimensional temporaries to the
end, where 2 are left with the proof.

This class changes only that question: `copy_covers_array` decides, never gt4py's
`Range.covers`, which approximates `Max`/`Min` bounds and can accept a copy of part of an
array (issue 60). A `PUSH` fold also needs the copy to be the only writer of `A2`: it hands
`A2`'s other writers to `A1`, which may be a program input. Every other condition and the rewrite itself are
gt4py's (top-level AccessNodes of the same rank, neither a view, same storage, one copy
edge between them, no other path that would become a cycle, the removed array a
single-use transient).

Restrictions: as gt4py's, plus exact coverage (the copy starts at 0 and ends at the last
element in every dimension, unit stride, or the array is empty) and, to remove `A2`, the
copy its only writer. Single-use data is
computed once per `gt_remove_copy_chains` call (as gt4py's pass does) or, for a
transformation constructed without it (the viewer, `apply_transformations`), once per
SDFG it is matched on. `can_be_applied` returns False on anything unexpected.
"""

from __future__ import annotations

from typing import Any, Optional

import dace
from dace.sdfg import nodes as dn
from dace.transformation.passes import analysis as dace_analysis
from gt4py.next.program_processors.runners.dace.transformations import (
    redundant_array_removers as gt_rar,
)

from gt4py_dace_xforms.analysis.copy_cover import copy_covers_array
from gt4py_dace_xforms.analysis.races import race_problem
from gt4py_dace_xforms.report import InlineReport


_Mode = gt_rar.CopyChainRemoverMode


@dace.properties.make_properties
class ProvenCopyChainRemover(gt_rar.CopyChainRemover):
    """Fold a copy `A1 -> A2` between top-level AccessNodes into one array where the copy
    provably moves all of `A1` or writes all of `A2`; see the module docstring."""

    def __init__(self, *args: Any, single_use_data: Optional[dict] = None, **kwargs: Any) -> None:
        super().__init__(*args, single_use_data=single_use_data or {}, **kwargs)
        self._given = single_use_data is not None

    def _single_use(self, sdfg: dace.SDFG) -> None:
        if not self._given and sdfg not in self._single_use_data:
            self._single_use_data = dace_analysis.FindSingleUseData().apply_pass(
                sdfg.root_sdfg, None
            )

    def can_be_applied(
        self, graph, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """gt4py's `CopyChainRemover` check, with the single-use data computed where none
        was given.

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched.
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag, passed on.

        Returns:
            Whether the copy is folded; False where `sdfg` has no single-use data or the
            check raised.
        """
        try:
            self._single_use(sdfg)
            if sdfg not in self._single_use_data:
                return False
            return bool(super().can_be_applied(graph, expr_index, sdfg, permissive))
        except Exception:  # noqa: BLE001  # gt_auto_optimize turns a raise into a failed compilation
            return False

    def _get_copy_chain_mode(self, sdfg: dace.SDFG, state) -> Any:
        # gt4py's own mode is not asked: `Range.covers` bounds `Max`/`Min` terms by
        # approximation, and takes `[0 : Max(0, Min(32, nc))]` as all of a 32-element
        # concat node (issue 60): the fold then wrote the other branch into the input the
        # copy came from.
        a1, a2 = self.node_a1, self.node_a2
        edges = [
            e
            for e in state.out_edges(a1)
            if isinstance(e.dst, dn.AccessNode) and e.dst.data == a2.data
        ]
        if len(edges) != 1:
            return _Mode.NONE
        edge = edges[0]
        d1, d2 = a1.desc(sdfg), a2.desc(sdfg)
        src = edge.data.get_src_subset(edge, state)
        dst = edge.data.get_dst_subset(edge, state)
        if src is None or dst is None or race_problem(sdfg, [state], (a1.data, a2.data)):
            return _Mode.NONE  # (a race gt4py's SDFG has: left as it is, docs/races.md)
        if d1.transient and self.is_single_use_data(sdfg, a1) and copy_covers_array(src, d1.shape):
            return _Mode.PULL
        # PUSH hands `A2`'s other writers to `A1`: sound only where the copy is `A2`'s one
        # writer (a concat node has one per branch, and `A1` may be a program input).
        if (
            d2.transient
            and self.is_single_use_data(sdfg, a2)
            and state.in_degree(a2) == 1
            and copy_covers_array(dst, d2.shape)
        ):
            return _Mode.PUSH
        return _Mode.NONE


def gt_remove_copy_chains(sdfg: dace.SDFG, *, validate: bool = True) -> InlineReport:
    """Apply `ProvenCopyChainRemover` to a fixed point (gt4py's `gt_remove_copy_chain` with
    the proven coverage).

    Args:
        sdfg: the SDFG, changed in place.
        validate: validate the SDFG at the end.

    Returns:
        The report: in `copy_chains_removed` the number of arrays removed.
    """
    for state in sdfg.states():
        for edge in state.edges():
            edge.data.try_initialize(sdfg, state, edge)  # src/dst subsets of copies (dace#1703)
    single_use = dace_analysis.FindSingleUseData().apply_pass(sdfg, None)
    removed = sdfg.apply_transformations_repeated(
        ProvenCopyChainRemover(single_use_data=single_use), validate=False, print_report=False
    )
    if validate:
        sdfg.validate()
    return InlineReport(copy_chains_removed=removed)
