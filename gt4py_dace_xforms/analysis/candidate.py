"""Analysis of one (intermediate, consumer Map) pair: can the reads be inlined, and how.

`analyse_candidate()` is pure: it never mutates the SDFG and never raises for a
graph it does not understand; it returns an `InlineCandidate` or a `Decline`.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Union, cast

import dace
import sympy
from dace import data as dace_data, dtypes
from dace.sdfg import nodes as dn, utils as sdutil
from dace.sdfg.state import SDFGState
from gt4py.next.program_processors.runners.dace.transformations.splitting_tools import (
    decompose_subset,
)

from gt4py_dace_xforms.analysis.concat import (
    INDEX_SYMBOL,
    ConcatAnalysis,
    EagerVerdict,
    analyse_concat,
    eager_verdict,
    index_symbol,
    only_branches_read,
    prove_union_covers,
    read_box,
)
from gt4py_dace_xforms.analysis.crossstate import cross_state_conflict
from gt4py_dace_xforms.analysis.indirect import (
    IndirectRead,
    covers_whole_array,
    match_indirect_read,
    reads_through_inner_maps,
)
from gt4py_dace_xforms.analysis.nested_reads import (
    NestedRead,
    match_nested_reads,
    receives_whole,
    symbol_conflict,
    whole_source,
)
from gt4py_dace_xforms.analysis.producer import (
    Decline,
    ProducerSlice,
    analyse_producer,
    data_users,
    is_single_element,
    referenced_elsewhere,
)
from gt4py_dace_xforms.analysis.races import race_problem
from gt4py_dace_xforms.analysis.selected import SelectedWriters, analyse_selected_writers
from gt4py_dace_xforms.analysis.symbolic import (
    UnsupportedIndex,
    canonical,
    prove_nonnegative_given,
    prove_zero,
    split_index,
    to_sympy,
)


_GLOBAL_LIFETIMES = (
    dtypes.AllocationLifetime.Global,
    dtypes.AllocationLifetime.Persistent,
    dtypes.AllocationLifetime.External,
)


@dataclasses.dataclass(frozen=True, eq=False)
class ReadGroup:
    """All reads of the intermediate by the consumer at one index (one shift distance).

    Attributes:
        key: canonical read index, one string per dimension.
        shift: per dimension, the distance between the element read and the element
            the producer computes in the "same" iteration (`k+1` read of a `k` write
            gives 1); a constant index gives the index itself.
        edges: the consumer-scope edges that read this element.
        param_mapping: producer parameter -> expression in the consumer's scope that
            selects the producer iteration computing the element read (single mode).
        index: the element read, per dimension, in the consumer's scope.
    """

    key: tuple[str, ...]
    shift: tuple[str, ...]
    edges: tuple
    param_mapping: tuple[tuple[str, sympy.Expr], ...]
    index: tuple[sympy.Expr, ...] = ()


@dataclasses.dataclass(frozen=True, eq=False)
class InlineCandidate:
    """A proven-sound inlining of an intermediate's reads into one consumer Map.

    Attributes:
        state: the state holding the consumer.
        producer_state, producer_node: the state and the AccessNode where the
            intermediate is written (the consumer's state and `intermediate` itself
            unless the read is in a later state).
        intermediate: the transient AccessNode the consumer reads.
        consumer: the consumer's MapEntry.
        producer: the producer's slice (what gets copied), in single mode.
        groups: one group per distinct read index; one inlined copy each.
        removes_intermediate: after the rewrite nobody reads the intermediate, so it and
            the producer's dataflow for it are removed.
        concat: in concat mode (several writers), their branches; each copy then
            selects, per index, the branch whose region holds it and evaluates only
            that one (lazy). Its `branches` are the writers some read reaches (the
            copies evaluate those and receive only their inputs); its `writers`, every
            writer (what the checks and the cost model look at).
        eager: concat mode only: evaluating every branch everywhere is proven memory
            safe (`analysis.concat.eager_verdict`), so copies may evaluate all and select.
        lazy_reason: why eager evaluation is not proven sound, if it is not.
        eager_verdict: concat mode only: the same, with the access that is not proven
            in bounds (`analysis.concat.EagerVerdict`).
        indirect: single mode only: reads at a computed index (deref tasklets of
            neighbor tables, `analysis.indirect`); one copy each, feeding the tasklet.
        nested: reads inside nested SDFGs the consumer passes the
            intermediate to (a scan's column, `analysis.nested_reads`); one copy per
            distinct element read there, evaluated inside the nested SDFG.
        selected: the intermediate is written in the branches of an if/else
            (`analysis.selected`); each copy evaluates, under the same conditions, the
            writers of the branch that ran. `concat` then lists every branch's
            writers together (for the checks and the cost model), `producer_state`
            and `producer_node` are those of the first branch.
    """

    state: SDFGState
    producer_state: SDFGState
    producer_node: dn.AccessNode
    intermediate: dn.AccessNode
    consumer: dn.MapEntry
    producer: Optional[ProducerSlice]
    groups: tuple[ReadGroup, ...]
    removes_intermediate: bool
    concat: Optional[ConcatAnalysis] = None
    eager: bool = False
    lazy_reason: Optional[str] = None
    indirect: tuple[IndirectRead, ...] = ()
    eager_verdict: Optional[EagerVerdict] = None
    selected: Optional[SelectedWriters] = None
    nested: tuple[NestedRead, ...] = ()

    @property
    def shifts(self) -> list[tuple[str, ...]]:
        """One entry per inlined copy: the shift of each read group, the index of each
        indirect read, the (state, index) of each read inside a nested SDFG."""
        return (
            [g.shift for g in self.groups]
            + [r.key for r in self.indirect]
            + [g.key for n in self.nested for g in n.groups]
        )

    @property
    def copies(self) -> int:
        """How many copies of the producer inlining makes: one per read group, indirect read and
        nested read group."""
        return len(self.groups) + len(self.indirect) + sum(len(n.groups) for n in self.nested)


AnalysisResult = Union[InlineCandidate, Decline]


def consumer_read_edges(state: SDFGState, intermediate: dn.AccessNode, consumer: dn.MapEntry):
    """The edges inside `consumer` that read `intermediate`, and the outer edges feeding them.

    Args:
        state: the state.
        intermediate: the intermediate's AccessNode.
        consumer: the consumer Map's entry.

    Returns:
        `(outer, reads)`: the edges from `intermediate` into `consumer` and the inner edges they
            feed (None where one enters without an `IN_` connector).
    """
    outer = [e for e in state.out_edges(intermediate) if e.dst is consumer]
    reads = []
    for oe in outer:
        if oe.dst_conn is None or not oe.dst_conn.startswith("IN_"):
            return outer, None
        reads.extend(state.out_edges_by_connector(consumer, "OUT_" + oe.dst_conn[3:]))
    return outer, reads


def analyse_candidate(
    sdfg: dace.SDFG,
    state: SDFGState,
    intermediate: dn.AccessNode,
    consumer: dn.MapEntry,
) -> AnalysisResult:
    """Decide whether the consumer's reads of `intermediate` can be inlined, and how.

    Checks, each with its own decline reason: the intermediate is a non-view transient
    with a local lifetime; its writers in this state are one top-level Map (single
    mode, see `analyse_producer`) or several writers on provably disjoint regions
    (concat mode, see `analysis.concat`); the consumer is a top-level Map whose every
    read is a single element with each index `param + c`; the producer range (or the
    union of the regions) provably covers every element read; data the inlined
    dataflow reads is not written elsewhere in the state.

    An internal error on a graph the analysis did not anticipate is a decline too
    ("analysis failed: ..."): `gt_inline_intermediates` runs inside gt4py's optimizer, where an
    exception would abort the user's compilation.

    Args:
        sdfg: the SDFG.
        state: the consumer's state.
        intermediate: the intermediate's AccessNode.
        consumer: the consumer Map's entry.

    Returns:
        the `InlineCandidate`, or a `Decline` with the reason.
    """
    try:
        return _analyse_candidate(sdfg, state, intermediate, consumer)
    except Exception as err:  # noqa: BLE001
        return Decline(f"analysis failed: {type(err).__name__}: {err}")


@dataclasses.dataclass(eq=False)
class _Proof:
    """What the proof steps of `_analyse_candidate` have established so far about one
    (intermediate, consumer) pair. Each step reads the facts of the steps before it and
    adds its own, or declines; nothing here touches the SDFG."""

    sdfg: dace.SDFG
    state: SDFGState
    intermediate: dn.AccessNode
    consumer: dn.MapEntry
    check_remainder: bool = True
    # the intermediate's descriptor; set by the first step, read by the later ones
    desc: Optional[dace_data.Data] = None
    users: dict = dataclasses.field(default_factory=dict)
    # the writers: one producer Map, a concat node's writers, or an if/else's branches
    selected: Optional[SelectedWriters] = None
    pstate: Optional[SDFGState] = None
    pnode: Optional[dn.AccessNode] = None
    prod: Optional[ProducerSlice] = None
    concat: Optional[ConcatAnalysis] = None
    parts: list = dataclasses.field(default_factory=list)  # (state, writer set or None)
    slice_states: list = dataclasses.field(
        default_factory=list
    )  # (state, slice) the copies evaluate
    # the consumer and its reads
    reads: list = dataclasses.field(default_factory=list)
    cparams: list = dataclasses.field(default_factory=list)
    cranges: dict = dataclasses.field(default_factory=dict)
    facts: list = dataclasses.field(default_factory=list)  # the consumer Map runs: extents >= 0
    used: set = dataclasses.field(default_factory=set)  # symbols the inlined dataflow sees
    inputs: set = dataclasses.field(default_factory=set)  # data it reads
    # what the reads need: one group per element read, indirect and nested reads
    groups: dict = dataclasses.field(default_factory=dict)
    split_dims: list = dataclasses.field(default_factory=list)
    boxes: list = dataclasses.field(default_factory=list)
    indirect: list = dataclasses.field(default_factory=list)
    nested: list = dataclasses.field(default_factory=list)
    verdict: Optional[EagerVerdict] = None
    lazy_reason: Optional[str] = None

    @property
    def slices(self) -> list[ProducerSlice]:
        return [sl for _, sl in self.slice_states]


def _analyse_candidate(
    sdfg, state, intermediate, consumer, check_remainder: bool = True
) -> AnalysisResult:
    """`_PROOF_STEPS` in order; the first decline is the answer, else the candidate."""
    proof = _Proof(sdfg, state, intermediate, consumer, check_remainder)
    for step in _PROOF_STEPS:
        decline = step(proof)
        if decline is not None:
            return decline
    return _candidate(proof)


def _intermediate_is_local_storage(p: _Proof) -> Optional[Decline]:
    """A transient array or scalar (no View, Stream or Reference) that lives only for the call."""
    if p.intermediate.data not in p.sdfg.arrays:
        return Decline("intermediate is not data of this SDFG")
    desc = p.desc = p.sdfg.arrays[p.intermediate.data]
    if not desc.transient:
        return Decline("intermediate is global (non-transient) data")
    if isinstance(desc, dace_data.View):
        return Decline("intermediate is a View")
    if type(desc) not in (dace_data.Array, dace_data.Scalar):
        # Streams pop on every read, references can be re-pointed: not element storage.
        return Decline(f"intermediate is a {type(desc).__name__}, not an array")
    if desc.lifetime in _GLOBAL_LIFETIMES:
        return Decline(f"intermediate has lifetime {desc.lifetime.name}")
    if p.state.scope_dict()[p.consumer] is not None:
        return Decline("consumer Map is not at the top level of the state")
    return None


def _one_writer_set(p: _Proof) -> Optional[Decline]:
    """One AccessNode written, in this state or an earlier one, or the branches of one
    if/else (`analysis.selected`); the consumer is not the producer."""
    sdfg, state, intermediate = p.sdfg, p.state, p.intermediate
    p.users = data_users(sdfg)
    writers = [(st, n) for st, n in p.users.get(intermediate.data, ()) if st.in_degree(n) > 0]
    if not writers:
        return Decline("intermediate is never written")
    if len(writers) > 1:
        # Several writers: only the branches of one if/else (exactly one of them runs).
        selected = analyse_selected_writers(sdfg, intermediate.data, writers, p.users)
        if isinstance(selected, Decline):
            return selected
        p.selected = selected
        if state.in_degree(intermediate) > 0:
            return Decline("intermediate is written in two states")
    pstate, pnode = (
        writers[0]
        if p.selected is None
        else (p.selected.branches[0].state, p.selected.branches[0].node)
    )
    p.pstate, p.pnode = pstate, pnode
    if pstate is not state and state.in_degree(intermediate) > 0:
        return Decline("intermediate is written in two states")
    if pstate is state and pnode is not intermediate:
        # A second, unwritten AccessNode is a source of the state: nothing orders its
        # reads after the write (in a loop they see the previous iteration's values).
        return Decline(
            "intermediate is read through another AccessNode than the one written in this state"
        )
    if any(
        isinstance(e.src, dn.MapExit) and pstate.entry_node(e.src) is p.consumer
        for e in pstate.in_edges(pnode)
    ):
        return Decline("producer and consumer are the same Map")
    return None


def _producer_evaluable(p: _Proof) -> Optional[Decline]:
    """What a copy evaluates: one producer Map's slice (`analyse_producer`), a concat
    node's writers (`analyse_concat`), or every branch's writers of an if/else."""
    in_edges = list(cast(SDFGState, p.pstate).in_edges(p.pnode))  # set by _one_writer_set
    if p.selected is not None:
        # For the checks below and the cost model: every writer of every branch.
        p.concat = ConcatAnalysis(
            tuple(b for sb in p.selected.branches for b in sb.writers.branches)
        )
        p.parts = [(sb.state, sb.writers) for sb in p.selected.branches]
    elif len(in_edges) == 1 and isinstance(in_edges[0].src, dn.MapExit):
        prod = analyse_producer(p.sdfg, p.pstate, in_edges[0], p.users)
        if isinstance(prod, Decline):
            return prod
        p.prod, p.parts = prod, [(p.pstate, None)]
    else:
        concat = analyse_concat(p.sdfg, p.pstate, p.pnode, p.users)
        if isinstance(concat, Decline):
            return concat
        p.concat, p.parts = concat, [(p.pstate, concat)]
    p.slice_states = (
        [(p.pstate, p.prod)]
        if p.prod is not None
        else [(pst, b.slice) for pst, part in p.parts for b in part.branches if b.slice is not None]
    )
    return None


def _consumer_reads(p: _Proof) -> Optional[Decline]:
    """The consumer reads the intermediate through plain `IN_`/`OUT_` connectors."""
    _, reads = consumer_read_edges(p.state, p.intermediate, p.consumer)
    if reads is None:
        return Decline("intermediate enters the consumer through a dynamic-range connector")
    if not reads:
        return Decline("consumer does not read the intermediate")
    p.reads = reads
    cmap = p.consumer.map
    p.cparams = list(cmap.params)
    p.cranges = {q: (b, e) for q, (b, e, _) in zip(p.cparams, cmap.range.ndrange())}
    p.facts = [to_sympy(e) - to_sympy(b) for b, e in p.cranges.values()]  # the consumer Map runs
    return None


def _symbols_mean_the_same(p: _Proof) -> Optional[Decline]:
    """Symbols the inlined dataflow sees mean the same inside the consumer: no clash with
    the rewrite's reserved names, the consumer's parameters or its dynamic inputs."""
    for pst, sl in p.slice_states:
        p.used |= _shadowed_symbols(pst, sl, {q for q, _, _ in sl.param_ranges})
    if p.selected is not None:
        p.used |= p.selected.condition_symbols
    clash = _reserved_name_clash(p.sdfg, p.slices, p.used, p.concat)
    if clash:
        return Decline(clash)
    if p.concat is not None:
        concat = p.concat
        p.used |= {
            str(s)
            for b in concat.branches
            for r in b.region
            for x in r
            for s in to_sympy(x).free_symbols
        }
        p.used |= {str(s) for b in concat.branches for x in b.source_index for s in x.free_symbols}
        ndim = len(cast(dace_data.Data, p.desc).shape)
        p.used -= {str(index_symbol(d)) for d in range(ndim)}
    shadowed = p.used & set(p.cparams)
    if shadowed:
        return Decline(f"consumer parameters {sorted(shadowed)} shadow symbols the producer uses")
    # A dynamic in-connector of the consumer (a value read at run time, e.g. for its
    # range) is also a name inside its scope: the copy would see it, not the symbol.
    shadowed = p.used & {c for c in p.consumer.in_connectors if not c.startswith("IN_")}
    if shadowed:
        return Decline(
            f"consumer dynamic inputs {sorted(shadowed)} shadow symbols the producer uses"
        )
    return None


def _inputs_unchanged(p: _Proof) -> Optional[Decline]:
    """The data the copies read holds, at the consumer, what the producer read: no shape
    of the consumer's parameters, no aliasing, no race in the states involved, and, from
    a later state, alive there and not written in between (`cross_state_conflict`)."""
    sdfg, concat = p.sdfg, p.concat
    p.inputs = {i.data for sl in p.slices for i in sl.inputs} | (
        {b.source.data for b in concat.branches if b.source is not None} if concat else set()
    )
    for data in p.inputs:
        if any(name in p.cparams for name in map(str, sdfg.arrays[data].free_symbols)):
            return Decline(f"shape of '{data}' depends on a consumer parameter")
    aliased = _may_alias_conflict(sdfg, p.users, p.inputs)
    if aliased:
        return Decline(aliased)
    # A race gt4py's SDFG already has: moving its accesses could pick another order.
    race = race_problem(
        sdfg, [p.state] + [pst for pst, _ in p.parts], p.inputs | {p.intermediate.data}
    )
    if race:
        return Decline(race.reason)
    if p.pstate is not p.state:
        for data in p.inputs:
            if (
                sdfg.arrays[data].transient
                and sdfg.arrays[data].lifetime == dtypes.AllocationLifetime.State
            ):
                return Decline(f"input '{data}' does not live beyond the producer's state")
        for pst, part in p.parts:
            part_inputs = (
                p.inputs if part is None else {i.data for b in part.branches for i in b.inputs}
            )
            conflict = cross_state_conflict(sdfg, pst, p.state, part_inputs, p.used)
            if conflict:
                return Decline(conflict)
    return None


def _reads_are_covered(p: _Proof) -> Optional[Decline]:
    """Every read is one the rewrite knows (a nested SDFG's column, an indirect read, an
    element `param + c`), and the producer provably writes what it reads."""
    p.split_dims = [set() for _ in p.parts]  # per writer set
    for e in p.reads:
        if e.data.wcr is not None:
            return Decline("consumer reads the intermediate through a WCR edge")
        if isinstance(e.dst, dn.ExitNode):
            return Decline("consumer reads the intermediate inside a nested Map (range read)")
        sub = e.data.get_src_subset(e, p.state)
        if isinstance(e.dst, dn.NestedSDFG) and (sub is None or not is_single_element(sub)):
            read = _nested_read
        elif isinstance(e.dst, dn.MapEntry) or sub is None or not is_single_element(sub):
            read = _indirect_read
        else:
            read = _element_read
        decline = read(p, e, sub)
        if decline is not None:
            return decline
    return None


def _nested_read(p: _Proof, e, sub) -> Optional[Decline]:
    """A column passed to a nested SDFG that reads elements of it (`analysis.nested_reads`)."""
    desc = cast(dace_data.Data, p.desc)
    found = match_nested_reads(p.state, e, len(desc.shape))
    if isinstance(found, Decline):
        return found
    # As for indirect reads: the copies may be asked for any element in bounds, so
    # the producer (or the union of the concat regions) must write every element.
    # An empty dimension has no element in bounds to read: assume every extent >= 1.
    extents = [to_sympy(n) - 1 for n in desc.shape]
    if p.prod is not None:
        reason = covers_whole_array(p.prod, desc.shape, extents, what="nested read")
    else:
        box = [(sympy.Integer(0), x) for x in extents]
        reason = _cover_concat(p.parts, box, list(p.facts) + extents, p.split_dims)
        p.boxes.append(box)
    if reason:
        return Decline(reason)
    needed = p.used | {str(x) for i in p.inputs for x in p.sdfg.arrays[i].free_symbols}
    # An input it already receives whole is reused; other data of that name is not ours.
    reason = symbol_conflict(found, needed) or next(
        (
            f"nested read: the nested SDFG has its own data named '{i}'"
            for i in sorted(p.inputs)
            if i in found.node.sdfg.arrays
            and i != found.connector
            and not receives_whole(p.sdfg, p.state, found.node, i)
            and not _passed_from_producer_input(p, found, i)
        ),
        None,
    )
    if reason:
        return Decline(reason)
    p.nested.append(found)
    return None


def _passed_from_producer_input(p: _Proof, found: NestedRead, name: str) -> bool:
    """Whether the nested SDFG receives `name` whole from the very AccessNode the producer
    reads it from (an earlier copy of another output of the same producer passed it): the
    same value, whatever else the state writes."""
    if p.prod is None or p.pstate is not p.state:
        return False
    source = whole_source(p.sdfg, p.state, found.node, name)
    # mypy narrows `p.state` to `p.pstate`'s Optional type by the `is` test above
    state = cast(SDFGState, p.state)
    return source is not None and any(e.src is source for e in state.in_edges(p.prod.map_entry))


def _indirect_read(p: _Proof, e, sub) -> Optional[Decline]:
    """An element at a computed index: a deref tasklet, maybe inside nested Maps
    (`analysis.indirect`); the producer must write the whole array."""
    desc = cast(dace_data.Data, p.desc)
    found: Union[list[IndirectRead], Decline]
    if isinstance(e.dst, dn.MapEntry):
        found = reads_through_inner_maps(p.state, e, len(desc.shape))
    else:
        one = match_indirect_read(p.state, e, len(desc.shape))
        found = one if isinstance(one, Decline) else [one]
    if isinstance(found, Decline):
        return found
    if p.prod is None:
        return Decline("indirect read of a concat node (not supported)")
    # An empty dimension has no element in bounds to read: assume every extent >= 1.
    reason = covers_whole_array(p.prod, desc.shape, [to_sympy(n) - 1 for n in desc.shape])
    if reason:
        return Decline(reason)
    inner_params = {q for r in found for m in r.inner_maps for q in m.map.params}
    shadowed = sorted(p.used & inner_params)
    if shadowed:
        return Decline(f"nested Map parameters {shadowed} shadow symbols the producer uses")
    p.indirect.extend(found)
    return None


def _element_read(p: _Proof, e, sub) -> Optional[Decline]:
    """One element, each index `param + c` of the consumer's parameters; reads of one
    element form one group (one copy), and the producer covers every element read."""
    if len(sub) != len(cast(dace_data.Data, p.desc).shape):
        return Decline("read and intermediate have different dimensionality")
    try:
        rterms = [split_index(b, p.cparams) for b, _, _ in sub.ndrange()]
    except UnsupportedIndex as err:
        return Decline(f"consumer read index unsupported: {err}")
    key = tuple(canonical(t.expr()) for t in rterms)
    if key in p.groups:
        p.groups[key]["edges"].append(e)
        return None
    if p.prod is not None:
        mapping, shift, reason = _solve_and_cover(rterms, p.prod, p.cranges)
    else:
        # no producer Map: the writers are a concat node's
        mapping, shift = {}, _concat_shift(rterms, cast(ConcatAnalysis, p.concat))
        box = read_box(rterms, p.cranges)
        reason = _cover_concat(p.parts, box, p.facts, p.split_dims)
        p.boxes.append(box)
    if reason:
        return Decline(reason)
    p.groups[key] = {
        "edges": [e],
        "mapping": mapping,
        "shift": shift,
        "index": [t.expr() for t in rterms],
    }
    return None


def _evaluation_mode(p: _Proof) -> Optional[Decline]:
    """Lazy or eager: an if/else is always lazy; a concat node is eager only where every
    branch is proven in bounds everywhere (`eager_verdict`). Never declines."""
    if p.selected is not None:
        p.selected = dataclasses.replace(
            p.selected,
            branches=tuple(
                dataclasses.replace(
                    sb, writers=dataclasses.replace(sb.writers, split_dims=tuple(sorted(dims)))
                )
                for sb, dims in zip(p.selected.branches, p.split_dims)
            ),
        )
        p.lazy_reason = "selected by an if/else: only the branch that ran is evaluated"
    elif p.concat is not None:
        p.concat = dataclasses.replace(p.concat, split_dims=tuple(sorted(p.split_dims[0])))
        pnode = cast(dn.AccessNode, p.pnode)  # set by _one_writer_set
        p.verdict = eager_verdict(p.sdfg, p.pstate, pnode.data, p.concat, p.boxes, p.facts)
        p.lazy_reason = p.verdict.reason
    return None


def _branches_read(p: _Proof) -> Optional[Decline]:
    """Concat mode: the copies evaluate only the writers some read reaches, and receive
    only their inputs (`only_branches_read`). Last, and only for the build: every check
    above took every writer (their inputs, symbols, eager bounds), and the cost model
    prices every writer too (`ConcatAnalysis.writers`), so on the same graph a candidate
    is taken or declined as before; only the copy built is smaller. Never declines."""
    if p.concat is not None and p.selected is None:
        p.concat = only_branches_read(p.concat, p.boxes, p.facts)
        p.parts = [(p.pstate, p.concat)]
    return None


#: The obligations, in the order they are proven (a new rewrite kind adds a step).
_PROOF_STEPS = (
    _intermediate_is_local_storage,
    _one_writer_set,
    _producer_evaluable,
    _consumer_reads,
    _symbols_mean_the_same,
    _inputs_unchanged,
    _reads_are_covered,
    _evaluation_mode,
    _branches_read,
)


def _candidate(p: _Proof) -> AnalysisResult:
    """The proven candidate; a kept intermediate must not leave a shape gt4py's
    MapSplitter would assert on."""
    state, intermediate, consumer = p.state, p.intermediate, p.consumer
    read_groups = tuple(
        ReadGroup(
            key=k,
            shift=tuple(v["shift"]),
            edges=tuple(v["edges"]),
            param_mapping=tuple(sorted(v["mapping"].items())),
            index=tuple(v["index"]),
        )
        for k, v in p.groups.items()
    )
    writer_nodes = [p.pnode] if p.selected is None else [sb.node for sb in p.selected.branches]
    removes = _is_last_reader(
        p.sdfg, state, intermediate, p.pstate, writer_nodes, consumer, p.users
    )
    if (
        not removes
        and p.check_remainder
        and _remainder_trips_map_splitter(p.sdfg, state, intermediate, consumer)
    ):
        return Decline(
            "the kept intermediate's one remaining reader reads a part of it that gt4py's "
            "MapSplitter cannot split off symbolically (its apply would assert)"
        )
    return InlineCandidate(
        state=state,
        producer_state=p.pstate,
        producer_node=p.pnode,
        intermediate=intermediate,
        consumer=consumer,
        producer=p.prod,
        groups=read_groups,
        removes_intermediate=removes,
        concat=p.concat,
        eager=p.verdict is not None and p.verdict.sound,
        lazy_reason=p.lazy_reason,
        eager_verdict=p.verdict,
        indirect=tuple(p.indirect),
        selected=p.selected,
        nested=tuple(p.nested),
    )


def _cover_concat(parts, box, facts, split_dims) -> Optional[str]:
    """Prove that each writer set in `parts` covers `box`; record the dimensions that
    select a writer of each in `split_dims` (any number: gt4py splits along Cell and K).
    Returns why not, or None."""
    for n, (_, part) in enumerate(parts):
        reason, dims = prove_union_covers(part, box, facts)
        if reason:
            return reason
        split_dims[n].update(dims)
    return None


#: Names the rewrite gives data in its nested SDFGs (`rewrite.INLINE_OUTPUT`, the eager
#: concat's per-branch values), next to the inputs' own names.
_REWRITE_DATA_PREFIXES = ("__inline_out", "__branch_value_", "__indirect_")


def _reserved_name_clash(sdfg, slices, used, concat: Optional[ConcatAnalysis]) -> Optional[str]:
    """A program name the rewrite would also use: a copy's data (an input or a local
    of the producer) named like the rewrite's own data, or, in concat mode, a program
    symbol named like an index symbol (`__concat_idx_<d>`), which the copy would bind."""
    data = {i.data for sl in slices for i in sl.inputs}
    data |= {n.data for sl in slices for n in sl.nodes if isinstance(n, dn.AccessNode)}
    if concat is not None:
        data |= {b.source.data for b in concat.branches if b.source is not None}
    for name in sorted(data):
        if name.startswith(_REWRITE_DATA_PREFIXES):
            return f"data '{name}' has a name the rewrite reserves"
    if concat is not None:
        names = set(used) | set(sdfg.symbols) | {p for sl in slices for p, _, _ in sl.param_ranges}
        names |= {
            p for sl in slices for n in sl.nodes if isinstance(n, dn.MapEntry) for p in n.map.params
        }
        clash = sorted(s for s in names if s.startswith(INDEX_SYMBOL.format("")))
        if clash:
            return f"symbols {clash} have names the rewrite reserves"
    clash = sorted(s for s in set(used) | set(sdfg.symbols) if s.startswith("__indirect_"))
    if clash:
        return f"symbols {clash} have names the rewrite reserves"
    return None


def _may_alias_conflict(sdfg, users, inputs) -> Optional[str]:
    """Inlining moves reads past writes of other data, which only names tell apart. With
    `may_alias` data two names can be one buffer, so decline if an input may alias or
    any data that may alias is written anywhere."""
    for data in sorted(inputs):
        if getattr(sdfg.arrays[data], "may_alias", False):
            return f"input '{data}' may alias other data"
    for name, desc in sdfg.arrays.items():
        if getattr(desc, "may_alias", False) and any(
            st.in_degree(n) > 0 for st, n in users.get(name, ())
        ):
            return f"'{name}' may alias other data and is written"
    return None


def _concat_shift(rterms, concat: ConcatAnalysis) -> list[str]:
    """Shift of a concat read, relative to the write index of its first Map branch.

    With no Map branch (copies only) the raw offset of the read index is reported.
    """
    ref = next(
        (
            b.slice
            for b in concat.branches
            if b.slice is not None
            and b.via is None
            and all(w.param is not None for w in b.slice.write_terms)
        ),
        None,
    )
    if ref is None or len(ref.write_terms) != len(rterms):
        return [canonical(t.offset) for t in rterms]
    return [
        canonical(t.offset - w.offset) if w.param is not None else canonical(t.expr())
        for t, w in zip(rterms, ref.write_terms)
    ]


def _shadowed_symbols(state, prod: ProducerSlice, prod_params: set[str]) -> set[str]:
    """Free symbols of the producer's slice other than its own parameters."""
    names: set[str] = set()
    for node in prod.nodes:
        for e in state.in_edges(node):
            names |= {str(s) for s in e.data.free_symbols}
        if isinstance(node, dn.Tasklet):
            names |= set(node.free_symbols)
        elif isinstance(node, dn.NestedSDFG):
            for v in node.symbol_mapping.values():
                names |= {str(s) for s in to_sympy(v).free_symbols}
        elif isinstance(node, dn.MapEntry):
            names |= {str(s) for s in node.map.range.free_symbols}
    names |= {str(s) for s in prod.write_edge.data.free_symbols}
    inner_params = {p for n in prod.nodes if isinstance(n, dn.MapEntry) for p in n.map.params}
    return names - prod_params - inner_params


def _solve_and_cover(rterms, prod: ProducerSlice, cranges):
    """Producer iteration for a read, and a proof that the producer range covers it.

    For a write index `pp + cw` and a read index `p + cr`, the element read was computed
    by iteration `pp = p + cr - cw`. Coverage needs `first <= pp <= last` at both ends
    of the consumer parameter's range (the index is `p` plus a constant, so the ends suffice).
    """
    mapping: dict[str, sympy.Expr] = dict(prod.fixed_params)
    shift: list[str] = []
    for dim, (w, r) in enumerate(zip(prod.write_terms, rterms)):
        if w.param is None:
            # The producer writes a fixed index in this dimension: the read must hit it.
            if not all(prove_zero(x - w.offset) for x in _bounds(r, cranges)):
                return (
                    None,
                    None,
                    f"read in dimension {dim} misses the producer's fixed write index {w.offset}",
                )
            shift.append(str(w.offset))
            continue
        first, last = (to_sympy(x) for x in prod.range_of(w.param))
        solved = sympy.expand(r.expr() - w.offset)
        mapping[w.param] = solved
        shift.append(canonical(r.offset - w.offset) if r.param is not None else canonical(solved))
        low, high = _bounds(dataclasses.replace(r, offset=r.offset - w.offset), cranges)
        facts = [to_sympy(e) - to_sympy(b) for b, e in cranges.values()]  # the consumer Map runs
        for proof, val in (
            (prove_nonnegative_given(low - first, facts), low),
            (prove_nonnegative_given(last - high, facts), high),
        ):
            if not proof:
                what = "does not cover" if proof is False else "cannot be proven to cover"
                return (
                    None,
                    None,
                    (
                        f"producer range of '{w.param}' [{first}, {last}] {what} the read {val} (dimension {dim})"
                    ),
                )
    return mapping, shift, None


def _bounds(term, cranges) -> list[sympy.Expr]:
    """The index `term` takes at the first and the last consumer iteration.

    Checking the low end against the producer's first iteration and the high end against
    its last suffices: the index grows with the parameter, and an empty consumer range
    reads nothing.
    """
    if term.param is None:
        return [term.offset, term.offset]
    b, e = cranges[term.param]
    return [to_sympy(b) + term.offset, to_sympy(e) + term.offset]


def _remainder_trips_map_splitter(sdfg, state, intermediate, consumer) -> bool:
    """True if, once `consumer` reads its own copies, the intermediate would be the shape
    gt4py's `MapSplitter` (run after this pass in `gt_auto_optimize`) matches but cannot
    apply to: written by one Map that writes nothing else, read by one edge on a strict
    part of what is written, with bounds whose order sympy cannot prove (runtime domain
    bounds). Its `can_be_applied` accepts that, its `apply` asserts on the decomposition
    (gt4py 1.2.3), so the whole build would fail where stock works.

    A remaining reader that is itself a Map this analysis accepts is not the final
    shape: the pass inlines it next (unless the policy declines it, see the report)."""
    writes = list(state.in_edges(intermediate))
    rest = [e for e in state.out_edges(intermediate) if e.dst is not consumer]
    if len(writes) != 1 or len(rest) != 1 or not isinstance(writes[0].src, dn.MapExit):
        return False
    other = rest[0].dst
    if isinstance(other, dn.MapEntry) and state.scope_dict()[other] is None:
        if not isinstance(
            _analyse_candidate(sdfg, state, intermediate, other, check_remainder=False), Decline
        ):
            return False
    if state.out_degree(writes[0].src) != 1:
        return False
    produced = writes[0].data.get_dst_subset(writes[0], state)
    consumed = rest[0].data.get_src_subset(rest[0], state)
    if (
        produced is None
        or consumed is None
        or consumed == produced
        or not produced.covers(consumed)
    ):
        return False
    # The same call, with the same (swapped) roles, as `MapSplitter.apply`.
    parts = decompose_subset(consumer=produced, producer=consumed)
    return parts is None or len(parts) <= 1


def _is_last_reader(sdfg, state, intermediate, pstate, writers, consumer, users) -> bool:
    """True if, once `consumer` no longer reads it, nothing reads the intermediate
    (`writers`: the AccessNodes written, in `pstate` or in the branches of an if/else)."""
    if any(e.dst is not consumer for e in state.out_edges(intermediate)):
        return False
    if any(
        w is not intermediate and pstate.out_degree(w) > 0 for w in writers if w in pstate.nodes()
    ):
        return False
    return not referenced_elsewhere(sdfg, intermediate.data, (intermediate, *writers), users)


def find_candidates(sdfg: dace.SDFG) -> Iterator[tuple[dace.SDFGState, dn.AccessNode, dn.MapEntry]]:
    """Every (state, transient AccessNode, top-level consumer Map) in `sdfg`.

    The intermediate may be written in the same state (by Maps or copies) or in an
    earlier one; the analysis sorts out which candidates are sound.

    Within a state, intermediates come in topological order: an upstream intermediate is
    inlined into its consumer before that consumer is itself inlined downstream, so a
    chain `A -> t1 -> B -> t2 -> C` can disappear whole.

    Args:
        sdfg: the SDFG.

    Yields:
        `(state, intermediate, consumer)` triples.
    """
    for state in sdfg.states():
        scope = state.scope_dict()
        for node in sdutil.dfs_topological_sort(state):
            if not isinstance(node, dn.AccessNode) or scope[node] is not None:
                continue
            desc = sdfg.arrays.get(node.data)
            written_by_map = any(isinstance(e.src, dn.MapExit) for e in state.in_edges(node))
            if (
                desc is None
                or isinstance(desc, dace.data.Scalar)
                or not (desc.transient or written_by_map)
            ):
                continue
            seen = set()
            for e in state.out_edges(node):
                if isinstance(e.dst, dn.MapEntry) and scope[e.dst] is None and e.dst not in seen:
                    seen.add(e.dst)
                    yield state, node, e.dst
