"""`InlineFuser`: evaluate an intermediate's producer inside its consumer, at the index read."""

from __future__ import annotations

import dataclasses
from typing import Any, Union

import dace
from dace import properties, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.policy.default import too_many_copies
from gt4py_dace_xforms.transformations import rewrite
from gt4py_dace_xforms.transformations.upstream import pending_upstream


def shifted_read_expressions(cls) -> list:
    """The two patterns `InlineFuser` and `VerticalWindow` match: 0, a Map writes the
    intermediate in this state (single or concat mode); 1, no Map writes it here: copies
    only (a concat of copies) or an earlier state.

    Returns:
        The two path graphs: `producer_exit` -> `intermediate` -> `consumer_entry`, and
        `intermediate` -> `consumer_entry`.
    """
    return [
        sdutil.node_path_graph(cls.producer_exit, cls.intermediate, cls.consumer_entry),
        sdutil.node_path_graph(cls.intermediate, cls.consumer_entry),
    ]


def candidate_of_match(
    xf, state: dace.SDFGState, sdfg: dace.SDFG
) -> Union[InlineCandidate, Decline]:
    """The inliner's analysis of a match of the two patterns `InlineFuser` and
    `VerticalWindow` share (`producer_exit`, `intermediate`, `consumer_entry`), each pair
    reported once: for the first writing Map, or by the second pattern where no Map writes.

    Args:
        xf: the matched transformation (its pattern nodes and `expr_index`).
        state: the state the pattern matched in.
        sdfg: the SDFG holding `state`.

    Returns:
        The candidate (`analysis.candidate.analyse_candidate`), or a `Decline` (also for
        the duplicate match of a pair reported by the other pattern).
    """
    result = analyse_candidate(sdfg, state, xf.intermediate, xf.consumer_entry)
    if isinstance(result, Decline):
        return result
    map_writers = [e.src for e in state.in_edges(xf.intermediate) if isinstance(e.src, dn.MapExit)]
    if xf.expr_index == 0 and xf.producer_exit is not map_writers[0]:
        return Decline(
            "the match is reported once, for the first writing Map"
        )  # no duplicate matches
    if xf.expr_index == 1 and map_writers:
        return Decline("a Map writes the intermediate here: matched by the first pattern")
    return result


@properties.make_properties
@transformation.explicit_cf_compatible
class InlineFuser(transformation.SingleStateTransformation):
    """Replace a consumer Map's reads of an intermediate by on-the-fly evaluation of its producer.

    Patterns: top-level `MapExit -> (T) -> MapEntry`, `T` a transient AccessNode, and
    `(T) -> MapEntry` where no Map writes `T` in that state (a concat of copies, or `T`
    written in an earlier state).
    For every distinct element of `T` that one consumer iteration reads (e.g. `T[i, k]`,
    `T[i, k+1]`, `T[i, k+2]`), the producer's dataflow for `T` is copied once into the
    consumer's scope as a nested SDFG whose `symbol_mapping` evaluates the producer at
    that element; all reads of that element, through any number of edges, use its
    result. If the consumer was the last reader of `T`, `T` and the producer dataflow
    that only served it are removed.

    ```python
    for i, k in range(N, K):  # producer
        T[i, k] = a[i, k] * 2 + b[i, k]
    for i, k in range(N, K - 2):  # consumer
        o[i, k] = T[i, k] + T[i, k + 1] + T[i, k + 2]
    # becomes
    for i, k in range(N, K - 2):
        t0 = a[i, k] * 2 + b[i, k]
        t1 = a[i, k + 1] * 2 + b[i, k + 1]
        t2 = ...
        o[i, k] = t0 + t1 + t2
    ```

    Index resolution: every dimension of a read must be `p + c`, `p` one consumer
    parameter, `c` free of consumer parameters but otherwise any expression
    (`i_K - __out_K_range_0`, `i_K - Min(model_top, nflatlev) - 3`); the write index
    the same with a producer parameter. The producer iteration is `pp = p + c_r - c_w`.
    See `analysis.candidate.analyse_candidate()` for the conditions, each checked by a
    named helper:

    - `T` is transient, not a View, not of global/persistent lifetime;
    - one AccessNode writes `T`; its writer is one Map (one element per iteration, no
      WCR, step 1, dataflow side-effect free, using only producer-local transients,
      `analysis.producer.analyse_producer()`) or several writers (concat mode);
    - every consumer read is a single element, not through a nested Map;
    - the producer's range provably (sympy, with the SDFG's symbols) covers every
      element read; undecidable means decline (`_solve_and_cover()`);
    - nothing else in the state writes the data the producer reads (so the consumer,
      which runs after the producer, reads the same values);
    - no consumer parameter shadows a symbol used by the producer.

    Concat mode: `T` written by several Maps or copies on provably disjoint regions (a
    `concat_where`); each copy evaluates, per index, only the branch whose region holds
    it (a `ConditionalBlock`), see `analysis.concat`. Reads in a later state than the
    writers are inlined if nothing they depend on changes in between
    (`analysis.crossstate`).

    Restrictions (declined, never mis-compiled): producers with dynamic Map ranges, WCR,
    nested Maps inside the consumer that read `T`, loops around producer or consumer
    state, regions not provably disjoint or not provably covering the reads.

    No cost model: applied through DaCe (`sdfg.apply_transformations(InlineFuser)`: one
    match, the first listed; `apply_transformations_repeated`: to a fixed point; the
    viewer) it consults no policy. Every match that is proven sound and needs at most
    `max_distinct_offsets` copies is applied, also where the intermediate must stay for
    other readers (`allow_partial`), eagerly where that is proven memory safe
    (`allow_eager`): per read what `InlineWhereSound()` accepts, but none of the rewrites
    `gt_inline_intermediates` runs around its inlining (in-place updates, outputs as
    buffers, windows, write-back copies and their retargeting, sibling tails, column
    reads). Inlining whatever is sound made icon4py's programs slower than stock on the
    CPU (docs/cost_model.md): for a build, use `gt_inline_intermediates` or the hooks,
    which ask the `CostModel`.

    Order: DaCe's pattern matcher, not this class, decides in which order matches are
    listed (per state, expression 0 before 1, then the subgraph matcher's order). So that
    applying them one by one from the top of the list (the viewer) ends where the
    inlining loop of `gt_inline_intermediates` ends (upstream first), a match declines
    while an intermediate its producer reads can itself be inlined into that producer
    (`upstream_first`, see `transformations.upstream`): upstream matches are listed first,
    downstream ones once those are applied.

    Everything is derived from the graph, so a match found by DaCe's pattern matcher can
    be serialized, rebuilt and applied (the DaCe VS Code viewer's path).
    `can_be_applied()` never mutates and never raises.
    """

    producer_exit = transformation.PatternNode(dn.MapExit)
    intermediate = transformation.PatternNode(dn.AccessNode)
    consumer_entry = transformation.PatternNode(dn.MapEntry)

    allow_partial = properties.Property(
        dtype=bool,
        default=True,
        desc="Inline even if the intermediate must stay for other readers (saves reads only).",
    )
    max_distinct_offsets = properties.Property(
        dtype=int,
        default=8,
        desc="Decline if the consumer reads more distinct elements than this (copies per offset).",
    )

    allow_eager = properties.Property(
        dtype=bool,
        default=True,
        desc="Concat mode: evaluate all branches and select where proven memory safe (else lazy).",
    )

    upstream_first = properties.Property(
        dtype=bool,
        default=True,
        desc="Decline while an intermediate the producer reads can itself be inlined into the producer "
        "(apply that match first: this copy would block it). Makes one-by-one application, in any "
        "order, end where gt_inline_intermediates ends.",
    )

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's patterns (`shifted_read_expressions`).

        Returns:
            The two paths: producer MapExit -> intermediate -> consumer MapEntry, and
            intermediate -> consumer MapEntry.
        """
        return shifted_read_expressions(cls)

    def analyse(self, state: dace.SDFGState, sdfg: dace.SDFG) -> Union[InlineCandidate, Decline]:
        """The analysis of this match, including this instance's configuration.

        Args:
            state: the state of the match.
            sdfg: its SDFG.

        Returns:
            The candidate to inline, or why not (a `Decline`; never raises).
        """
        try:
            return self._analyse(state, sdfg)
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return Decline(f"analysis failed: {type(err).__name__}: {err}")

    def _analyse(self, state: dace.SDFGState, sdfg: dace.SDFG) -> Union[InlineCandidate, Decline]:
        result = candidate_of_match(self, state, sdfg)
        if isinstance(result, Decline):
            return result
        too_many = too_many_copies(result, self.max_distinct_offsets)
        if too_many:
            return Decline(too_many)
        if not result.removes_intermediate and not self.allow_partial:
            return Decline("intermediate has other readers and allow_partial is off")
        if self.upstream_first:
            upstream = pending_upstream(sdfg, result)
            if upstream is not None:
                return Decline(
                    f"inline '{upstream}' into the producer first (this copy would block that)"
                )
        if result.eager and not self.allow_eager:
            result = dataclasses.replace(result, eager=False)
        return result

    def can_be_applied(
        self, graph, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether the match is sound (no policy asked; see the class docstring).

        Args:
            graph: the state of the match.
            expr_index: which of the two patterns matched.
            sdfg: its SDFG.
            permissive: unused (DaCe's signature).

        Returns:
            True where `apply` would inline; never raises, never mutates.
        """
        return isinstance(self.analyse(graph, sdfg), InlineCandidate)

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> list[dn.NestedSDFG]:
        """Inline the match (`rewrite.inline_candidate`).

        Args:
            graph: the state of the match.
            sdfg: its SDFG, changed in place.

        Returns:
            The nested SDFGs (producer copies) put into the consumer.

        Raises:
            ValueError: the match does not apply (`can_be_applied` is False).
        """
        result = self.analyse(graph, sdfg)
        if isinstance(result, Decline):
            raise ValueError(f"InlineFuser cannot be applied: {result.reason}")
        return rewrite.inline_candidate(sdfg, result)
