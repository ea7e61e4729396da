"""Analysis of concat nodes: an intermediate written by several producers on disjoint regions.

gt4py lowers `concat_where(K < b, lower, upper)` to one AccessNode written twice: each
branch writes the subset where it is selected. A branch's writer is a top-level Map,
or a copy from another AccessNode (which may itself be written by a Map, or be
program data). `analyse_concat()` describes every branch and proves that the regions
are disjoint and that every element the consumer reads lies in one of them. It never
mutates the SDFG.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Optional, Union, cast

import dace
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.broadcast import copy_dims
from gt4py_dace_xforms.analysis.producer import Decline, ProducerSlice, SliceInput, analyse_producer
from gt4py_dace_xforms.analysis.symbolic import (
    IndexTerm,
    prove_nonnegative,
    prove_nonnegative_given,
    to_sympy,
)


#: Name of the nested-SDFG symbol that holds the intermediate's index in dimension `d`.
INDEX_SYMBOL = "__concat_idx_{}"


def index_symbol(dim: int) -> sympy.Symbol:
    """The symbol standing for the index of dimension `dim` of a concat node (`INDEX_SYMBOL`).

    Args:
        dim: the dimension.

    Returns:
        the symbol.
    """
    return dace.symbolic.symbol(INDEX_SYMBOL.format(dim))


@dataclasses.dataclass(frozen=True, eq=False)
class Branch:
    """One writer of a concat node and how to evaluate it at an index of the intermediate.

    Attributes:
        region: per dimension of the intermediate, the inclusive range it writes.
        edge: the edge into the intermediate (MapExit or copy).
        slice: the Map that computes the branch, if it is inlined; `None` for a read.
        param_at: producer parameter -> expression in `index_symbol(d)` selecting the
            producer iteration that computes the intermediate's element.
        source: for a read branch, the data read and the AccessNode supplying it.
        source_index: for a read branch, the index read, in `index_symbol(d)`.
        via: the AccessNode the branch is copied through (for cleanup), if any.
    """

    region: tuple[tuple[sympy.Expr, sympy.Expr], ...]
    edge: dace.sdfg.graph.MultiConnectorEdge
    slice: Optional[ProducerSlice] = None
    param_at: tuple[tuple[str, sympy.Expr], ...] = ()
    source: Optional[SliceInput] = None
    source_index: tuple[sympy.Expr, ...] = ()
    via: Optional[dn.AccessNode] = None

    @property
    def inputs(self) -> tuple[SliceInput, ...]:
        # a read branch (no slice) has its source
        """What the branch reads: its slice's inputs, or, for a branch that copies from data,
        that source."""
        return self.slice.inputs if self.slice is not None else (cast(SliceInput, self.source),)


@dataclasses.dataclass(frozen=True, eq=False)
class ConcatAnalysis:
    #: The branches a copy evaluates: every writer of the node, or, once the reads are
    #: known, only those whose region some read reaches (`only_branches_read`).
    """A concat node's branches (its writers on provably disjoint regions), as `analyse_concat`
    finds them."""

    branches: tuple[Branch, ...]
    #: The dimensions tested at run time to select a branch (set once the reads are known).
    split_dims: tuple[int, ...] = ()
    #: Every writer of the node, in its order, where `branches` leaves some out (else empty).
    all_writers: tuple[Branch, ...] = ()

    @property
    def writers(self) -> tuple[Branch, ...]:
        """Every writer of the node, read or not: what gt4py's own passes see of it, what
        the soundness checks and the cost model look at."""
        return self.all_writers or self.branches

    @property
    def unread(self) -> tuple[Branch, ...]:
        """The writers no read reaches: a copy neither evaluates them nor receives their inputs."""
        return tuple(b for b in self.writers if b not in self.branches)


def _region_of_slice(prod: ProducerSlice) -> boxes.Box:
    """The box a producer writes: per dimension `[first + c, last + c]`."""
    region = []
    for term in prod.write_terms:
        if term.param is None:
            region.append((term.offset, term.offset))
        else:
            first, last = (to_sympy(x) for x in prod.range_of(term.param))
            region.append((first + term.offset, last + term.offset))
    return tuple(region)


def _param_at(prod: ProducerSlice, index_of_dim) -> tuple[tuple[str, sympy.Expr], ...]:
    """Producer iteration writing element `index_of_dim(d)`: `pp = index - c_w`."""
    return tuple(
        (t.param, sympy.expand(index_of_dim(d) - t.offset))
        for d, t in enumerate(prod.write_terms)
        if t.param is not None
    ) + tuple(prod.fixed_params)


def analyse_branch(sdfg, state, edge, users) -> Union[Branch, Decline]:
    """Describe the writer behind one edge into a concat node.

    Args:
        sdfg: the SDFG.
        state: the state.
        edge: an edge into the concat node.
        users: data name -> the `(state, AccessNode)` pairs that access it (`access_nodes_by_data`).

    Returns:
        the `Branch`, or a `Decline` with the reason.
    """
    ndim = len(sdfg.arrays[edge.dst.data].shape)
    if edge.data.wcr is not None:
        return Decline("concat branch writes with a WCR")
    if isinstance(edge.src, dn.MapExit):
        prod = analyse_producer(sdfg, state, edge, users)
        if isinstance(prod, Decline):
            return prod
        return Branch(
            region=_region_of_slice(prod),
            edge=edge,
            slice=prod,
            param_at=_param_at(prod, index_symbol),
        )
    if not isinstance(edge.src, dn.AccessNode):
        return Decline(f"concat branch written by a {type(edge.src).__name__}")
    dst = edge.data.get_dst_subset(edge, state)
    src = edge.data.get_src_subset(edge, state)
    if dst is None or src is None or len(dst) != ndim:
        return Decline("concat branch copy has no explicit subsets")
    # A source with fewer dimensions is broadcast (a Cell-only field copied to one level).
    dims = copy_dims(dst.size(), src.size())
    if dims is None:
        return Decline("concat branch copy changes shape")
    region = tuple((to_sympy(b), to_sympy(e)) for b, e, _ in dst.ndrange())
    # Element t of the intermediate is element t - dst_lo + src_lo of the source, in the
    # source dimension j copied from intermediate dimension d = dims.index(j).
    dst_lo = [to_sympy(b) for b, _, _ in dst.ndrange()]
    src_at = [
        index_symbol(dims.index(j)) - dst_lo[dims.index(j)] + to_sympy(sb)
        for j, (sb, _, _) in enumerate(src.ndrange())
    ]
    source = edge.src
    desc = sdfg.arrays[source.data]
    if isinstance(desc, dace_data.View):
        return Decline(f"concat branch copies from the view '{source.data}'")
    followed = _follow_copy(sdfg, state, source, src, users)
    if isinstance(followed, ProducerSlice):
        return Branch(
            region=region,
            edge=edge,
            slice=followed,
            param_at=_param_at(followed, lambda j: src_at[j]),
            via=source,
        )
    for st, node in users.get(source.data, ()):
        if st is state and node is not source and state.in_degree(node) > 0:
            return Decline(
                f"concat branch source '{source.data}' is written elsewhere in the state"
            )
    return Branch(
        region=region,
        edge=edge,
        source=SliceInput(source.data, source),
        source_index=tuple(src_at),
    )


def _follow_copy(sdfg, state, source: dn.AccessNode, read, users) -> Optional[ProducerSlice]:
    """The Map computing `source`, if `source` is a transient that only feeds this copy."""
    desc = sdfg.arrays[source.data]
    if not desc.transient or state.in_degree(source) != 1 or state.out_degree(source) != 1:
        return None
    if len(users.get(source.data, ())) != 1:
        return None
    edge = next(iter(state.in_edges(source)))
    if not isinstance(edge.src, dn.MapExit):
        return None
    prod = analyse_producer(sdfg, state, edge, users)
    if isinstance(prod, Decline):
        return None
    read_box = [(to_sympy(b), to_sympy(e)) for b, e, _ in read.ndrange()]
    copy_runs = [hi - lo for lo, hi in read_box]  # an empty copy reads nothing
    return prod if boxes.contains(_region_of_slice(prod), read_box, copy_runs) else None


def analyse_concat(sdfg, state, intermediate, users) -> Union[ConcatAnalysis, Decline]:
    """All branches of a concat node, with a proof that their regions are disjoint.

    Args:
        sdfg: the SDFG.
        state: the state.
        intermediate: the concat node (an AccessNode).
        users: data name -> the `(state, AccessNode)` pairs that access it (`access_nodes_by_data`).

    Returns:
        the `ConcatAnalysis`, or a `Decline` with the reason.
    """
    branches = []
    for edge in state.in_edges(intermediate):
        br = analyse_branch(sdfg, state, edge, users)
        if isinstance(br, Decline):
            return br
        branches.append(br)
    reason = boxes.prove_disjoint([b.region for b in branches], what="concat regions")
    if reason:
        return Decline(reason)
    return ConcatAnalysis(tuple(branches))


def prove_union_covers(
    concat: ConcatAnalysis, read_box: list[tuple[sympy.Expr, sympy.Expr]], facts=()
) -> tuple[Optional[str], tuple[int, ...]]:
    """Prove that every index in `read_box` lies in some branch's region
    (`boxes.prove_cover`: any number of dimensions split, regions empty for some values).

    Returns `(None, dims)` on success, `dims` being the dimensions whose test selects the
    branch at run time (empty if every region holds every read), or `(reason, ())`.

    Args:
        concat: the concat node's analysis.
        read_box: the read's box (inclusive bounds per dimension).
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        `(None, dims)` where proven, else `(reason, ())`.
    """
    cover = boxes.prove_cover(
        read_box, [b.region for b in concat.branches], facts, what="concat regions"
    )
    return cover.reason, cover.select_dims


def only_branches_read(concat: ConcatAnalysis, read_boxes, facts=()) -> ConcatAnalysis:
    """`concat` evaluating only the branches whose region is not provably disjoint from
    every box in `read_boxes`; `concat` itself where every branch is reached, or none.

    A lazy copy selects the branch whose region holds the index asked for, so a branch
    no read reaches is never selected, yet the copy would receive each of its inputs
    whole through new connectors of the consumer. Where such an input is a transient
    gt4py splits by its writers and fuses into its readers, that read of all of it keeps
    it whole (icon4py's `compute_advection_in_corrector_vertical_momentum`: gtir_tmp_129,
    docs/concat_mode.md). The regions are disjoint and cover every read
    (`analyse_concat`, `prove_union_covers`), and in every dimension outside
    `split_dims` each region spans the reads (`boxes.prove_cover`), so each read index
    lies in exactly one kept branch and the box tests along `split_dims` still select it.
    `writers` keeps every writer, in the node's order.

    Args:
        concat: the concat node's analysis.
        read_boxes: the boxes the consumer reads.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        the analysis restricted to the branches some read reaches.
    """
    if not read_boxes:
        return concat
    read = tuple(
        b
        for b in concat.branches
        if not all(boxes.disjoint(b.region, tuple(box), facts) for box in read_boxes)
    )
    if not read or len(read) == len(concat.branches):
        return concat
    return dataclasses.replace(concat, branches=read, all_writers=concat.writers)


def read_box(terms: list[IndexTerm], cranges) -> list[tuple[sympy.Expr, sympy.Expr]]:
    """Per dimension, the lowest and highest index a read takes over the consumer Map.

    Args:
        terms: the read's index per dimension.
        cranges: the consumer Map's parameter ranges.

    Returns:
        `(lo, hi)` per dimension.
    """
    box = []
    for t in terms:
        if t.param is None:
            box.append((t.offset, t.offset))
        else:
            b, e = cranges[t.param]
            box.append((to_sympy(b) + t.offset, to_sympy(e) + t.offset))
    return box


@dataclasses.dataclass(frozen=True)
class EagerVerdict:
    """Whether evaluating every branch of a concat node at every read index is proven
    memory safe (`reason is None`), and if not, the first access that is not.

    Attributes:
        reason: why eager evaluation is not proven sound; `None` if it is.
        branch: the branch (index into `ConcatAnalysis.writers`) whose access fails.
        data: the array it reads.
        dim: the dimension of `data` in which the access is not proven in bounds.
        index: the index read in that dimension, in `index_symbol(d)`.
        bounds: lowest and highest value of `index` over the read boxes (array indices),
            for the first box that fails.
        extent: the size of `data` in `dim`.
        side: `"low"` (`bounds[0] >= 0` not proven) or `"high"` (`bounds[1] < extent`).
        field: the GTIR annotation of `data` in `dim` (`{"covers": [lo, hi] | None,
            "origin": o, "name": dimension}`, program indices, `annotations.field_dim`),
            if `data` is an annotated program field.
        inferred: what gt4py's domain inference says this branch reads of `data` in `dim`
            (`[lo, hi]`, program indices, recorded on the concat node), if known.
        selected: the annotated range (array indices of the concat node) where the
            branch is selected, if known.
        margin: the expression that is not proven `>= 0` (`bounds[0]`, or
            `extent - 1 - bounds[1]`), and `facts` the facts the proof had (the reads
            run, program fields cover what the program reads): `witness()` searches for
            arguments that satisfy the facts and make the margin negative.
    """

    reason: Optional[str] = None
    branch: Optional[int] = None
    data: Optional[str] = None
    dim: Optional[int] = None
    index: Optional[sympy.Expr] = None
    bounds: Optional[tuple[sympy.Expr, sympy.Expr]] = None
    extent: Optional[sympy.Expr] = None
    side: Optional[str] = None
    field: Optional[dict] = None
    inferred: Optional[list] = None
    selected: Optional[list] = None
    margin: Optional[sympy.Expr] = None
    facts: tuple = ()

    @property
    def sound(self) -> bool:
        """Whether eager evaluation is proven safe (no reason against it)."""
        return self.reason is None

    def witness(self) -> Optional[dict]:
        """Symbol values under which eager evaluation reads this access out of bounds
        although every fact holds: then eager is not merely unproven but wrong for those
        arguments. `None` if the search finds none (`find_witness`; it is not run by the
        analysis itself, only by reports).

        Returns:
            symbol values, or None.
        """
        return None if self.margin is None else find_witness(self.margin, self.facts)


def eager_verdict(sdfg, state, data: str, concat: ConcatAnalysis, boxes, facts) -> EagerVerdict:
    """Whether evaluating every branch at every read index is proven not to fault.

    Eager evaluation runs all branches and selects one result afterwards; the other
    results are discarded, so only memory safety matters: every element any branch
    reads, at every index in `boxes` (the read boxes of the intermediate), must lie in
    its array. Program fields are only known to be that large through the annotations
    carried from GTIR (`analysis.annotations`); without them this is not provable.
    Branches must be simple: tasklets and scalars reading single elements. Pure; never
    raises on a graph it does not understand (that is a verdict with a reason).

    Args:
        sdfg: the SDFG.
        state: the state.
        data: the concat node's data.
        concat: its analysis.
        boxes: the read boxes of the intermediate.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        the `EagerVerdict`: sound, or the reason and the accesses not proven.
    """
    from gt4py_dace_xforms.analysis import annotations

    ann = annotations.concat_annotation(sdfg, data)
    if ann is None:
        recorded = annotations.read(sdfg.arrays[data]) or {}
        if recorded.get("kind") == "concat":
            return EagerVerdict(
                "the concat annotation from GTIR was recorded for another shape of this node"
            )
        return EagerVerdict("no concat annotation from GTIR for this node")
    # Every writer, also one no read reaches (`only_branches_read`): proven for all of
    # them, eager evaluation of any subset is memory safe too.
    data_read = {i.data for b in concat.writers for i in b.inputs}
    facts = list(facts) + annotations.field_facts(sdfg, data_read)
    ann_branches = annotations.concat_branches(ann, concat.writers)
    for n, br in enumerate(concat.writers):
        accesses = _branch_accesses(sdfg, state, br)
        if isinstance(accesses, str):
            return EagerVerdict(f"branch {n}: {accesses}", branch=n)
        info = ann_branches[n] if ann_branches else None
        for name, index in accesses:
            shape = sdfg.arrays[name].shape
            for box in boxes:
                for d, (expr, size) in enumerate(zip(index, shape)):
                    lo, hi = _index_bounds(expr, box)
                    field = annotations.field_dim(sdfg, name, d)
                    where = dict(
                        branch=n,
                        data=name,
                        dim=d,
                        index=expr,
                        extent=to_sympy(size),
                        field=field,
                        inferred=annotations.branch_reads(info, field, name),
                        selected=info.get("selected") if info else None,
                    )
                    if lo is None:
                        return EagerVerdict(
                            f"branch {n}: index {expr} of '{name}' is not the intermediate's index plus a constant",
                            **where,
                        )
                    side = None
                    if not prove_nonnegative_given(lo, facts):
                        side, margin = "low", lo
                    elif not prove_nonnegative_given(to_sympy(size) - 1 - hi, facts):
                        side, margin = "high", to_sympy(size) - 1 - hi
                    if side:
                        return EagerVerdict(
                            f"branch {n} may read '{name}' out of bounds in dimension {d} outside its region",
                            bounds=(lo, hi),
                            side=side,
                            margin=margin,
                            facts=tuple(facts),
                            **where,
                        )
    return EagerVerdict()


def find_witness(expr, facts, samples: int = 3000, seed: int = 0) -> Optional[dict]:
    """Integer values of the symbols for which every fact is `>= 0` and `expr < 0`; `None`
    if the search finds none (it proves nothing then).

    A symbol that only one fact bounds, with coefficient +-1 (a field's range start or
    end: `covers_lo - origin >= 0`), is set to its tightest value, the field exactly as
    large as the program reads; the other symbols are drawn at random from small values,
    nonnegative ones first (seeded, deterministic).

    Args:
        expr: the expression to make negative.
        facts: the expressions to keep `>= 0`.
        samples: how many random points to try.
        seed: the random seed.

    Returns:
        symbol name -> value, or None.
    """
    expr = to_sympy(expr)
    facts = [sympy.expand(to_sympy(f)) for f in facts]
    symbols = sorted(expr.free_symbols.union(*(f.free_symbols for f in facts)), key=str)
    tight: dict = {}  # symbol -> (coefficient, the fact's rest)
    for sym in symbols:
        holding = [f for f in facts if sym in f.free_symbols]
        if len(holding) == 1:
            coeff = holding[0].coeff(sym)
            rest = sympy.expand(holding[0] - coeff * sym)
            if (
                coeff in (1, -1)
                and sym not in rest.free_symbols
                and not (rest.free_symbols & set(tight))
            ):
                tight[sym] = (coeff, rest)
    free = [x for x in symbols if x not in tight]
    rng = random.Random(seed)
    for n in range(samples):
        values = {x: rng.randint(0 if n < samples // 2 else -2, 16) for x in free}
        try:
            for sym, (coeff, rest) in tight.items():
                # coeff * sym + rest >= 0, tightest: sym = -rest (coeff 1) or rest (coeff -1)
                values[sym] = int(-coeff * rest.subs(values))
            if expr.subs(values) < 0 and all(f.subs(values) >= 0 for f in facts):
                return {str(x): v for x, v in values.items()}
        except (ArithmeticError, TypeError, ValueError):
            continue
    return None


def _branch_accesses(sdfg, state, br: Branch):
    """(data, index in `index_symbol(d)`) for every element the branch reads."""
    if br.slice is None:  # a read branch: it has a source
        return [(cast(SliceInput, br.source).data, br.source_index)]
    if any(not isinstance(n, (dn.Tasklet, dn.AccessNode)) for n in br.slice.nodes):
        return "contains nested scopes or SDFGs"
    mapping = {dace.symbolic.symbol(p): e for p, e in br.param_at}
    result = []
    for node in br.slice.nodes:
        for e in state.in_edges(node):
            if e.src is not br.slice.map_entry or e.data.is_empty():
                continue
            sub = e.data.get_src_subset(e, state) or e.data.subset
            if any(
                not prove_nonnegative(0 - (to_sympy(hi) - to_sympy(lo)))
                for lo, hi, _ in sub.ndrange()
            ):
                return "reads more than one element per evaluation"
            result.append(
                (e.data.data, tuple(to_sympy(lo).subs(mapping) for lo, _, _ in sub.ndrange()))
            )
    return sorted(
        result, key=lambda access: (access[0], str(access[1]))
    )  # reports name the same one each run


def _index_bounds(expr, box):
    """Lowest and highest value of `expr` (one index symbol plus a constant) over `box`."""
    expr = sympy.expand(expr)
    syms = [d for d in range(len(box)) if index_symbol(d) in expr.free_symbols]
    if not syms:
        return expr, expr
    if len(syms) > 1:
        return None, None
    d = syms[0]
    t = index_symbol(d)
    rest = sympy.expand(expr - t)
    if t in rest.free_symbols:
        return None, None
    return box[d][0] + rest, box[d][1] + rest
