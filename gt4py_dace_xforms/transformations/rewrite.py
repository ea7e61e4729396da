"""Graph mutation for inlining: copy a producer slice into a consumer, reroute reads, clean up.

These functions only execute what an `InlineCandidate` (see `analysis.candidate`)
describes; every decision has been made before they are called.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Optional, Sequence, cast

import dace
import sympy
from dace import subsets as dace_sbs
from dace.properties import CodeBlock
from dace.sdfg import nodes as dn
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion, SDFGState

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.candidate import InlineCandidate, ReadGroup
from gt4py_dace_xforms.analysis.concat import ConcatAnalysis, index_symbol
from gt4py_dace_xforms.analysis.indirect import IndirectRead
from gt4py_dace_xforms.analysis.nested_reads import NestedRead, receives_whole, whole_source
from gt4py_dace_xforms.analysis.producer import ProducerSlice, SliceInput, referenced_elsewhere
from gt4py_dace_xforms.analysis.selected import SelectedWriters
from gt4py_dace_xforms.analysis.symbolic import to_sympy
from gt4py_dace_xforms.transformations.scan_window import window_template_copies


#: Name of the output of an inlined producer copy, inside its nested SDFG.
INLINE_OUTPUT = "__inline_out"


def build_producer_sdfg(
    sdfg: dace.SDFG, state: SDFGState, prod: ProducerSlice, intermediate: str
) -> dace.SDFG:
    """A single-state SDFG that computes one element of `intermediate` like `prod` does.

    The producer's Map parameters become free symbols of the returned SDFG; the
    caller binds them through the nested SDFG's `symbol_mapping`. Inputs keep their
    outer names and descriptors (non-transient), so the copied Memlets stay valid.
    Outputs of copied nodes that served other results of the producer are written to
    dummy transients.

    Args:
        sdfg: the SDFG holding the producer (read, not changed).
        state: the producer's state.
        prod: the producer slice: the nodes of the Map that compute `intermediate`.
        intermediate: the name of the array the slice writes.

    Returns:
        The new SDFG, its one output the scalar `INLINE_OUTPUT`.
    """
    nsdfg = dace.SDFG(f"inlined_{intermediate}")
    nstate = nsdfg.add_state("compute", is_start_block=True)
    copies: dict[dn.Node, dn.Node] = {}
    inner_maps: dict[dn.Map, dn.Map] = {}

    _add_inputs(nsdfg, sdfg, [inp.data for inp in prod.inputs])
    input_nodes = {inp.data: nstate.add_access(inp.data) for inp in prod.inputs}

    for node in prod.nodes:
        if isinstance(node, dn.AccessNode) and node.data not in nsdfg.arrays:
            nsdfg.add_datadesc(node.data, copy.deepcopy(sdfg.arrays[node.data]))
        new = copy.deepcopy(node)
        copies[node] = new
        nstate.add_node(new)
        if isinstance(node, dn.NestedSDFG):
            new.sdfg.parent = nstate
            new.sdfg.parent_sdfg = nsdfg
            new.sdfg.parent_nsdfg_node = new
    # A Map's entry and exit must share one Map object after copying.
    for node in prod.nodes:
        if isinstance(node, dn.MapEntry):
            inner_maps[node.map] = copies[node].map
    for node in prod.nodes:
        if isinstance(node, dn.MapExit) and node.map in inner_maps:
            copies[node].map = inner_maps[node.map]

    out_desc = dace.data.Scalar(sdfg.arrays[intermediate].dtype, transient=False)
    nsdfg.add_datadesc(INLINE_OUTPUT, out_desc)

    def _src(e):
        if e.src is prod.map_entry:
            return input_nodes[e.data.data], None
        return copies[e.src], e.src_conn

    # Edges among slice nodes and from the Map entry into them.
    for node in prod.nodes:
        for e in state.in_edges(node):
            if e.src is prod.map_entry and e.data.is_empty():
                continue
            src, src_conn = _src(e)
            nstate.add_edge(src, src_conn, copies[node], e.dst_conn, copy.deepcopy(e.data))

    # The write of the intermediate becomes a write of the scalar output.
    w = prod.write_edge
    src, src_conn = _src(w)
    out_node = nstate.add_access(INLINE_OUTPUT)
    if isinstance(src, dn.AccessNode):
        memlet = dace.Memlet(
            data=src.data, subset=w.data.get_src_subset(w, state), other_subset="0"
        )
    else:
        memlet = dace.Memlet(data=INLINE_OUTPUT, subset="0")
    nstate.add_edge(src, src_conn, out_node, None, memlet)

    _terminate_dangling_outputs(sdfg, state, prod, copies, nsdfg, nstate)
    for node in list(nstate.data_nodes()):
        if nstate.degree(node) == 0:
            nstate.remove_node(node)
    return nsdfg


def _terminate_dangling_outputs(sdfg, state, prod, copies, nsdfg, nstate) -> None:
    """Give every output connector of a copied node that lost its consumer a dummy sink."""
    for node, new in copies.items():
        if isinstance(node, (dn.AccessNode, dn.MapExit)):
            continue
        connected = {e.src_conn for e in nstate.out_edges(new)}
        for e in state.out_edges(node):
            if e.src_conn is None or e.src_conn in connected or e.data.is_empty():
                continue
            connected.add(e.src_conn)
            desc = sdfg.arrays[e.data.data]
            shape = list(e.data.subset.size())
            name, _ = nsdfg.add_array(
                f"__unused_{node.label}_{e.src_conn}",
                shape,
                desc.dtype,
                transient=True,
                find_new_name=True,
            )
            nstate.add_edge(
                new,
                e.src_conn,
                nstate.add_access(name),
                None,
                dace.Memlet.from_array(name, nsdfg.arrays[name]),
            )


def _symbol_table(nsdfg: dace.SDFG, sdfg: dace.SDFG, names) -> None:
    for name in names:
        if name not in nsdfg.symbols:
            nsdfg.add_symbol(name, sdfg.symbols.get(name, dace.int64))


def _producer_template(
    sdfg: dace.SDFG, state: SDFGState, prod: ProducerSlice, intermediate: str
) -> dace.SDFG:
    """`build_producer_sdfg` with its symbol table filled: free symbols and the producer
    parameters, which the caller binds through `symbol_mapping`."""
    template = build_producer_sdfg(sdfg, state, prod, intermediate)
    params = {p for p, _, _ in prod.param_ranges}
    _symbol_table(template, sdfg, set(map(str, template.free_symbols)) | params)
    return template


def build_concat_sdfg(sdfg: dace.SDFG, cand: InlineCandidate) -> dace.SDFG:
    """A nested SDFG computing element `(__concat_idx_0, ...)` of a concat node.

    Lazy (default): one branch of a `ConditionalBlock` per writer, guarded by its region
    along the split dimension, so only the branch selected at an index is evaluated
    there. Eager (`cand.eager`, proven memory safe): every branch is evaluated into its
    own scalar in one state and a tasklet selects the result, no control flow.
    A Map branch runs a copy of its producer (`build_producer_sdfg`) with the producer
    parameters bound to the index; a read branch copies one element of its source.

    Args:
        sdfg: the SDFG holding the candidate (read, not changed).
        cand: the sound candidate.

    Returns:
        The new SDFG, its one output the scalar `INLINE_OUTPUT`, the index
        `__concat_idx_<d>` among its symbols.
    """
    name = cand.intermediate.data
    nsdfg = _element_sdfg(sdfg, f"inlined_concat_{name}", cand)
    dtype = sdfg.arrays[name].dtype
    concat = cast(ConcatAnalysis, cand.concat)  # a concat candidate

    branches = concat.branches
    if len(branches) == 1:
        _emit_branch(
            sdfg,
            cand,
            nsdfg,
            nsdfg.add_state("evaluate", is_start_block=True),
            branches[0],
            0,
            INLINE_OUTPUT,
        )
    elif cand.eager:
        st = nsdfg.add_state("evaluate_all", is_start_block=True)
        values = []
        for n, br in enumerate(branches):
            v, _ = nsdfg.add_scalar(f"__branch_value_{n}", dtype, transient=True)
            values.append(_emit_branch(sdfg, cand, nsdfg, st, br, n, v))
        code = f"__sel_{len(branches) - 1}"
        for n in reversed(range(len(branches) - 1)):
            code = f"(__sel_{n} if {_region_condition(branches[n], concat.split_dims)} else {code})"
        select = st.add_tasklet(
            "select_branch",
            {f"__sel_{n}": None for n in range(len(branches))},
            {"__out": None},
            f"__out = {code}",
        )
        for n, v in enumerate(values):
            st.add_edge(v, None, select, f"__sel_{n}", dace.Memlet(data=v.data, subset="0"))
        st.add_edge(
            select,
            "__out",
            st.add_access(INLINE_OUTPUT),
            None,
            dace.Memlet(data=INLINE_OUTPUT, subset="0"),
        )
    else:
        cond_block = ConditionalBlock("select_branch")
        nsdfg.add_node(cond_block, is_start_block=True)
        for n, br in enumerate(branches):
            region = ControlFlowRegion(f"branch_{n}", sdfg=nsdfg)
            cond_block.add_branch(CodeBlock(_region_condition(br, concat.split_dims)), region)
            _emit_branch(
                sdfg,
                cand,
                nsdfg,
                region.add_state(f"evaluate_{n}", is_start_block=True),
                br,
                n,
                INLINE_OUTPUT,
            )
    names = set(map(str, nsdfg.free_symbols))
    names |= {str(index_symbol(d)) for d in range(len(sdfg.arrays[name].shape))}
    _symbol_table(nsdfg, sdfg, names)
    nsdfg.using_explicit_control_flow = True
    return nsdfg


def _add_inputs(nsdfg: dace.SDFG, sdfg: dace.SDFG, names) -> None:
    """`sdfg`'s descriptors of `names`, as non-transient data of the nested `nsdfg`."""
    for data in names:
        desc = copy.deepcopy(sdfg.arrays[data])
        desc.transient = False
        nsdfg.add_datadesc(data, desc)


def _element_sdfg(sdfg: dace.SDFG, label: str, cand: InlineCandidate) -> dace.SDFG:
    """An empty SDFG for one element of `cand`'s intermediate: its inputs and the
    `INLINE_OUTPUT` scalar."""
    nsdfg = dace.SDFG(label)
    _add_inputs(nsdfg, sdfg, _inputs(cand))
    nsdfg.add_datadesc(
        INLINE_OUTPUT, dace.data.Scalar(sdfg.arrays[cand.intermediate.data].dtype, transient=False)
    )
    return nsdfg


def build_selected_sdfg(sdfg: dace.SDFG, cand: InlineCandidate) -> dace.SDFG:
    """A nested SDFG computing element `(__concat_idx_0, ...)` of an intermediate written
    in the branches of an if/else (`cand.selected`).

    A `ConditionalBlock` with the original block's conditions, in its order; each branch
    evaluates the writers of the branch that ran: one writer directly, several (a concat
    inside the branch) through the lazy concat SDFG of `build_concat_sdfg`.

    Args:
        sdfg: the SDFG holding the candidate (read, not changed).
        cand: the sound candidate.

    Returns:
        The new SDFG, its one output the scalar `INLINE_OUTPUT`.
    """
    name = cand.intermediate.data
    nsdfg = _element_sdfg(sdfg, f"inlined_selected_{name}", cand)
    ndim = len(sdfg.arrays[name].shape)
    index_names = {str(index_symbol(d)) for d in range(ndim)}
    selected = cast(SelectedWriters, cand.selected)  # an if/else candidate
    cond_block = ConditionalBlock("select_writer")
    nsdfg.add_node(cond_block, is_start_block=True)
    for n, sb in enumerate(selected.branches):
        region = ControlFlowRegion(f"writer_{n}", sdfg=nsdfg)
        cond_block.add_branch(
            None if sb.condition is None else CodeBlock(sb.condition.as_string), region
        )
        bstate = region.add_state(f"evaluate_{n}", is_start_block=True)
        sub = dataclasses.replace(
            cand,
            producer_state=sb.state,
            producer_node=sb.node,
            concat=sb.writers,
            selected=None,
            eager=False,
        )
        if len(sb.writers.branches) == 1:
            _emit_branch(sdfg, sub, nsdfg, bstate, sb.writers.branches[0], n, INLINE_OUTPUT)
            continue
        inner = build_concat_sdfg(sdfg, sub)
        used = list(_inputs(sub))
        node = bstate.add_nested_sdfg(
            inner,
            dict.fromkeys(used),
            {INLINE_OUTPUT: None},
            name=f"writer_{n}_{name}",
            symbol_mapping={s: s for s in inner.symbols},
        )
        for data in used:
            bstate.add_edge(
                bstate.add_access(data),
                None,
                node,
                data,
                dace.Memlet.from_array(data, nsdfg.arrays[data]),
            )
        bstate.add_edge(
            node,
            INLINE_OUTPUT,
            bstate.add_access(INLINE_OUTPUT),
            None,
            dace.Memlet(data=INLINE_OUTPUT, subset="0"),
        )
    _symbol_table(
        nsdfg,
        sdfg,
        set(map(str, nsdfg.free_symbols)) | index_names | set(selected.condition_symbols),
    )
    nsdfg.using_explicit_control_flow = True
    return nsdfg


def _emit_branch(sdfg, cand, nsdfg, bstate, br, n, out_name) -> dn.AccessNode:
    """Dataflow in `bstate` that writes the branch's value at the index into `out_name`;
    returns the AccessNode written."""
    out = bstate.add_access(out_name)
    if br.slice is None:
        src = bstate.add_access(br.source.data)
        bstate.add_edge(
            src,
            None,
            out,
            None,
            dace.Memlet(
                data=br.source.data,
                subset=dace_sbs.Range([(i, i, 1) for i in br.source_index]),
                other_subset="0",
            ),
        )
        return out
    name = cand.intermediate.data
    inner = _producer_template(sdfg, cand.producer_state, br.slice, name)
    mapping = {s: s for s in inner.symbols}
    mapping.update(dict(br.param_at))
    node = bstate.add_nested_sdfg(
        inner,
        {i.data: None for i in br.slice.inputs},
        {INLINE_OUTPUT: None},
        symbol_mapping=mapping,
        name=f"branch_{n}_{name}",
    )
    for inp in br.slice.inputs:
        bstate.add_edge(
            bstate.add_access(inp.data),
            None,
            node,
            inp.data,
            dace.Memlet.from_array(inp.data, nsdfg.arrays[inp.data]),
        )
    bstate.add_edge(node, INLINE_OUTPUT, out, None, dace.Memlet(data=out_name, subset="0"))
    return out


def _region_condition(br, split_dims) -> str:
    """The branch's box test along the dimensions that select it (`boxes.box_test`)."""
    return boxes.box_test(
        br.region, split_dims, [str(index_symbol(d)) for d in range(len(br.region))]
    )


def _inputs(cand: InlineCandidate) -> dict[str, dn.AccessNode]:
    """Data the inlined dataflow reads -> the AccessNode that supplies it (first one wins)."""
    found: dict[str, dn.AccessNode] = {}
    sources: Sequence[SliceInput]
    if cand.concat is None:  # then a producer Map
        sources = cast(ProducerSlice, cand.producer).inputs
    else:
        sources = [i for br in cand.concat.branches for i in br.inputs]
    for inp in sources:
        found.setdefault(inp.data, inp.source)
    return found


def inline_candidate(sdfg: dace.SDFG, cand: InlineCandidate) -> list[dn.NestedSDFG]:
    """Execute `cand`: one nested SDFG per read group inside the consumer, reads rerouted.

    When `cand.removes_intermediate` holds, the intermediate, its array and the dataflow
    that only served it are removed.

    Args:
        sdfg: the SDFG, changed in place.
        cand: the sound candidate (its analysis of the unchanged graph).

    Returns:
        The inserted nested SDFG nodes: one per read group, per indirect read and per
        read inside a nested SDFG.
    """
    state, consumer = cand.state, cand.consumer
    template = element_template(sdfg, cand)
    in_conns = pass_inputs(sdfg, cand)

    dtype = sdfg.arrays[cand.intermediate.data].dtype
    inserted = []
    for group in cand.groups:
        bind = element_binding(cand, group)
        inserted.append(
            _insert_copy(sdfg, state, consumer, template, group, bind, in_conns, dtype, cand)
        )
    for read in cand.indirect:
        inserted.append(
            _insert_indirect_copy(sdfg, state, consumer, template, read, in_conns, cand)
        )
    per_scan: dict[dn.NestedSDFG, list] = {}
    for nread in cand.nested:
        copies = _insert_nested_copies(sdfg, state, consumer, template, nread, in_conns, cand)
        per_scan.setdefault(nread.node, []).extend(copies)
        inserted.extend(copies)
    for node, copies in per_scan.items():
        # Copies a scan's loop evaluates at consecutive levels: one per iteration, the rest
        # carried from the iterations before (docs/scans.md, *Nested reads*, the scan window).
        window_template_copies(sdfg, node, copies)

    for conn in in_conns.values():
        _drop_unused_entry_connector(state, consumer, conn)  # every copy read it from elsewhere
    drop_intermediate(sdfg, cand)
    return inserted


def element_template(sdfg: dace.SDFG, cand: InlineCandidate) -> dace.SDFG:
    """The nested SDFG that evaluates one element of `cand`'s intermediate: the producer's
    slice (its parameters free), a concat node's lazy or eager selection, or an if/else's.

    Args:
        sdfg: the SDFG holding the candidate (read, not changed).
        cand: the sound candidate.

    Returns:
        The template SDFG (`build_producer_sdfg`, `build_concat_sdfg` or
        `build_selected_sdfg`), copied for each read.
    """
    if cand.selected is not None:
        return build_selected_sdfg(sdfg, cand)
    if cand.concat is None:  # then a producer Map
        prod = cast(ProducerSlice, cand.producer)
        return _producer_template(sdfg, cand.producer_state, prod, cand.intermediate.data)
    return build_concat_sdfg(sdfg, cand)


def element_binding(cand: InlineCandidate, group: ReadGroup) -> dict:
    """The `symbol_mapping` entries that make `element_template` evaluate the element
    `group` reads: the producer iteration, or the index (`__concat_idx_<d>`).

    Args:
        cand: the candidate (concat or not).
        group: one group of reads of the same element.

    Returns:
        Template symbol -> expression in the consumer's scope.
    """
    if cand.concat is None:
        return dict(group.param_mapping)
    return {str(index_symbol(d)): e for d, e in enumerate(group.index)}


def pass_inputs(sdfg: dace.SDFG, cand: InlineCandidate) -> dict[str, str]:
    """One consumer connector pair per input the copies read: data -> `OUT_` connector.
    In the producer's state the inputs come from the AccessNodes the producer read (keeps
    the order); in a later state from new AccessNodes (nothing writes them in between).

    Args:
        sdfg: the SDFG, changed in place (connectors and edges added).
        cand: the candidate whose consumer gets the connectors.

    Returns:
        Input data name -> the consumer's `OUT_` connector it passes through.
    """
    state, consumer = cand.state, cand.consumer
    in_conns: dict[str, str] = {}
    for data, source in _inputs(cand).items():
        if cand.producer_state is not state:
            source = state.add_access(data)
        conn = consumer.next_connector(f"inl_{data}")
        consumer.add_in_connector("IN_" + conn)
        consumer.add_out_connector("OUT_" + conn)
        state.add_edge(
            source, None, consumer, "IN_" + conn, dace.Memlet.from_array(data, sdfg.arrays[data])
        )
        in_conns[data] = "OUT_" + conn
    return in_conns


def drop_intermediate(sdfg: dace.SDFG, cand: InlineCandidate) -> None:
    """After the consumer's reads are rerouted: drop its connectors of the intermediate and,
    where it was the last reader, the intermediate and the dataflow that only served it.

    Args:
        sdfg: the SDFG, changed in place.
        cand: the candidate whose reads were rerouted.
    """
    state = cand.state
    _drop_consumer_path(state, cand)
    if state.degree(cand.intermediate) == 0:
        state.remove_node(
            cand.intermediate
        )  # a read-only node in a later state with no reader left
    if cand.removes_intermediate:
        remove_dead_dataflow(sdfg, state, [cand.intermediate])
        writers = (
            [(cand.producer_state, cand.producer_node)]
            if cand.selected is None
            else [(sb.state, sb.node) for sb in cand.selected.branches]
        )
        for wstate, wnode in writers:
            if wstate is not state:
                remove_dead_dataflow(sdfg, wstate, [wnode], going=[w for _, w in writers])


def _insert_copy(sdfg, state, consumer, template, group: ReadGroup, bind, in_conns, dtype, cand):
    nsdfg = copy.deepcopy(template)
    mapping = {name: name for name in nsdfg.symbols}
    mapping.update(bind)
    node = state.add_nested_sdfg(
        nsdfg,
        {d: None for d in in_conns},
        {INLINE_OUTPUT: None},
        symbol_mapping=mapping,
        name=f"inline_{cand.intermediate.data}",
    )
    for data, conn in in_conns.items():
        state.add_edge(consumer, conn, node, data, dace.Memlet.from_array(data, sdfg.arrays[data]))
    if not in_conns:
        state.add_edge(consumer, None, node, None, dace.Memlet())
    scalar, _ = sdfg.add_scalar(
        f"__inl_{cand.intermediate.data}", dtype, transient=True, find_new_name=True
    )
    out = state.add_access(scalar)
    state.add_edge(node, INLINE_OUTPUT, out, None, dace.Memlet(data=scalar, subset="0"))
    for e in group.edges:
        dst_sub: Optional[dace_sbs.Subset] = None
        if isinstance(e.dst, dn.AccessNode):
            dst_sub = e.data.get_dst_subset(e, state)
        state.add_edge(
            out, None, e.dst, e.dst_conn, dace.Memlet(data=scalar, subset="0", other_subset=dst_sub)
        )
        state.remove_edge(e)
    return node


def build_indirect_sdfg(
    sdfg: dace.SDFG, state: SDFGState, template: dace.SDFG, prod: ProducerSlice, read: IndirectRead
) -> tuple[dace.SDFG, dict[str, str], dict]:
    """The producer copy for one indirect read: `template` behind a first state whose
    interstate edge sets the producer parameters from the index, read at run time from
    the deref tasklet's index inputs (scalars `__indirect_idx_<n>`).

    Consumer-scope symbols in the index enter as `__indirect_sym_<name>`, so that a
    producer parameter of the same name (`i_K`) can be assigned from them.

    Args:
        sdfg: the SDFG holding the read (read, not changed).
        state: the consumer's state.
        template: the element template (`element_template`), copied.
        prod: the producer slice, for its parameters and write terms.
        read: the indirect read: its deref tasklet, index connectors and element.

    Returns:
        The SDFG, index connector -> scalar name, and the symbol mapping for the nested
        node.
    """
    nsdfg = copy.deepcopy(template)
    idx_names = {conn: f"__indirect_idx_{n}" for n, conn in enumerate(read.index_conns)}
    for conn, name in idx_names.items():
        edge = next(e for e in state.in_edges(read.tasklet) if e.dst_conn == conn)
        dtype = read.tasklet.in_connectors.get(conn)
        if dtype is None or getattr(dtype, "type", None) is None:
            dtype = sdfg.arrays[edge.data.data].dtype
        nsdfg.add_scalar(name, dtype, transient=False)
    free = {s for e in read.element for s in e.free_symbols}
    outer = sorted((s for s in free if str(s) not in idx_names), key=str)
    subs = {s: dace.symbolic.symbol(idx_names[str(s)]) for s in free if str(s) in idx_names}
    subs.update({s: dace.symbolic.symbol(f"__indirect_sym_{s}") for s in outer})
    assignments = {p: dace.symbolic.symstr(to_sympy(v)) for p, v in prod.fixed_params}
    for w, element in zip(prod.write_terms, read.element):
        # every write term has a parameter (`covers_whole_array`)
        assignments[cast(str, w.param)] = dace.symbolic.symstr(
            element.subs(subs, simultaneous=True) - w.offset
        )
    nsdfg.add_state_before(
        nsdfg.start_block, "bind_indirect_index", is_start_block=True, assignments=assignments
    )
    mapping = {}
    for s in outer:
        name = f"__indirect_sym_{s}"
        nsdfg.add_symbol(name, sdfg.symbols.get(str(s), dace.int64))
        mapping[name] = str(s)
    for name in map(str, nsdfg.free_symbols):
        mapping.setdefault(name, name)
        if name not in nsdfg.symbols:
            nsdfg.add_symbol(name, sdfg.symbols.get(name, dace.int64))
    return nsdfg, idx_names, mapping


def _insert_indirect_copy(sdfg, state, consumer, template, read: IndirectRead, in_conns, cand):
    """Feed the deref tasklet of `read` with a producer copy evaluated at its index, in place
    of the intermediate (inside the nested Maps the read passes, the producer's inputs
    routed through them); the tasklet's index inputs move to the copy."""
    nsdfg, idx_names, mapping = build_indirect_sdfg(sdfg, state, template, cand.producer, read)
    node = state.add_nested_sdfg(
        nsdfg,
        {d: None for d in [*in_conns, *idx_names.values()]},
        {INLINE_OUTPUT: None},
        symbol_mapping=mapping,
        name=f"inline_{cand.intermediate.data}",
    )
    for data, conn in in_conns.items():
        src, src_conn = consumer, conn
        for inner in read.inner_maps:
            src, src_conn = inner, _route_through(state, sdfg, src, src_conn, inner, data)
        state.add_edge(src, src_conn, node, data, dace.Memlet.from_array(data, sdfg.arrays[data]))
    if not in_conns and not idx_names:
        state.add_edge(
            read.inner_maps[-1] if read.inner_maps else consumer, None, node, None, dace.Memlet()
        )
    # The tasklet stays, reduced to `out = field` with the copy's value as `field`: its
    # output edge (a WCR into the MapExit of a neighbor reduction, say) is kept as it is.
    tasklet = read.tasklet
    for e in list(state.in_edges(tasklet)):
        if e.dst_conn in idx_names:
            state.add_edge(e.src, e.src_conn, node, idx_names[e.dst_conn], copy.deepcopy(e.data))
        state.remove_edge(e)
        if e.dst_conn in idx_names:
            tasklet.remove_in_connector(e.dst_conn)
    dtype = sdfg.arrays[cand.intermediate.data].dtype
    scalar, _ = sdfg.add_scalar(
        f"__inl_{cand.intermediate.data}", dtype, transient=True, find_new_name=True
    )
    value = state.add_access(scalar)
    state.add_edge(node, INLINE_OUTPUT, value, None, dace.Memlet(data=scalar, subset="0"))
    state.add_edge(value, None, tasklet, read.edge.dst_conn, dace.Memlet(data=scalar, subset="0"))
    tasklet.code = CodeBlock(f"{read.out_conn} = {read.edge.dst_conn}")
    for inner in reversed(read.inner_maps):
        for conn in [c for c in inner.out_connectors if c.startswith("OUT_")]:
            if not any(True for _ in state.out_edges_by_connector(inner, conn)):
                _drop_unused_entry_connector(state, inner, conn)
    return node


def _insert_nested_copies(
    sdfg, state, consumer, template, read: NestedRead, in_conns, cand
) -> list:
    """The copies for reads inside a nested SDFG (`analysis.nested_reads`): the inputs
    and the symbols they need are passed into it under their own names, one copy per
    (state, index) there, evaluated where the element is read (in a scan: inside the
    loop, at the level read). The array itself leaves the nested SDFG."""
    node, inner = read.node, read.node.sdfg
    for data, conn in in_conns.items():
        if data in inner.arrays:
            # Passed already: by a copy for another read of this node (a scan reading the
            # column at two levels), or whole by gt4py itself (`receives_whole`).
            ours = any(
                e.src is consumer and e.src_conn == conn
                for e in state.in_edges(node)
                if e.dst_conn == data
            )
            # ... or by a copy of another output of the same producer: from the AccessNode
            # this copy's input comes from too.
            feed = next(e for e in state.in_edges(consumer) if e.dst_conn == "IN_" + conn[4:])
            same = (
                whole_source(sdfg, state, node, data) is feed.src
            )  # `pass_inputs` feeds from it directly
            if not ours and not same and not receives_whole(sdfg, state, node, data):
                raise RuntimeError(
                    f"nested read: '{data}' in {node.label} is not the producer's input"
                )
            continue
        _add_inputs(inner, sdfg, [data])
        node.add_in_connector(data)
        state.add_edge(consumer, conn, node, data, dace.Memlet.from_array(data, sdfg.arrays[data]))
    params = {p for p, _, _ in cand.producer.param_ranges} if cand.producer is not None else set()
    index_names = {str(index_symbol(d)) for d in range(len(read.offset))}
    names = {str(x) for x in template.free_symbols} | {
        str(x) for d in in_conns for x in sdfg.arrays[d].free_symbols
    }
    for name in sorted((names - params - index_names) | set(read.scope_symbols)):
        node.symbol_mapping.setdefault(name, dace.symbolic.symbol(name))
        if name not in inner.symbols:
            inner.add_symbol(name, sdfg.symbols.get(name, dace.int64))
    dtype = sdfg.arrays[cand.intermediate.data].dtype
    inserted = []
    for group in read.groups:
        element = [i + o for i, o in zip(group.index, read.offset)]
        if cand.producer is not None:
            bind = {
                w.param: sympy.expand(x - w.offset)
                for w, x in zip(cand.producer.write_terms, element)
            }
            bind.update(dict(cand.producer.fixed_params))
        else:
            bind = {str(index_symbol(d)): x for d, x in enumerate(element)}
        nsdfg = copy.deepcopy(template)
        mapping = {name: name for name in nsdfg.symbols}
        mapping.update(bind)
        st = group.state
        copy_node = st.add_nested_sdfg(
            nsdfg,
            {d: None for d in in_conns},
            {INLINE_OUTPUT: None},
            symbol_mapping=mapping,
            name=f"inline_{cand.intermediate.data}",
        )
        for data in in_conns:
            st.add_edge(
                st.add_access(data),
                None,
                copy_node,
                data,
                dace.Memlet.from_array(data, inner.arrays[data]),
            )
        scalar, _ = inner.add_scalar(
            f"__inl_{cand.intermediate.data}", dtype, transient=True, find_new_name=True
        )
        out = st.add_access(scalar)
        st.add_edge(copy_node, INLINE_OUTPUT, out, None, dace.Memlet(data=scalar, subset="0"))
        for e in group.edges:
            st.add_edge(out, None, e.dst, e.dst_conn, dace.Memlet(data=scalar, subset="0"))
            st.remove_edge(e)
            if st.degree(e.src) == 0:
                st.remove_node(e.src)
        inserted.append(copy_node)
    if not any(n.data == read.connector for st in inner.all_states() for n in st.data_nodes()):
        state.remove_edge(read.edge)
        node.remove_in_connector(read.connector)
        inner.remove_data(read.connector, validate=False)
    _pass_outer_symbols(state, node)
    return inserted


def _pass_outer_symbols(state, node: dn.NestedSDFG) -> None:
    """Bind every symbol the nested SDFG `node` now uses and defines nowhere to the same
    symbol outside, where one is defined: the copies' bindings may name the producer's
    write offset (a branch Map over `Max(0, nc):N` writes at `i - Max(0, nc)`), which no
    input's shape mentions (issue 60)."""
    inner = node.sdfg
    missing = (
        {str(s) for s in inner.free_symbols} - set(node.in_connectors) - set(node.symbol_mapping)
    )
    if not missing:
        return
    outer = state.symbols_defined_at(node)
    for name in sorted(missing & set(outer)):
        node.symbol_mapping[name] = dace.symbolic.symbol(name)
        if name not in inner.symbols:
            dtype = outer[name]
            inner.add_symbol(name, dtype if isinstance(dtype, dace.typeclass) else dace.int64)


def _route_through(state, sdfg, src, src_conn, inner: dn.MapEntry, data: str) -> str:
    """An `OUT_` connector of the nested Map `inner` carrying all of `data` from
    `src`/`src_conn` (reused if the Map already has one fed from there)."""
    for e in state.in_edges(inner):
        if e.src is src and e.src_conn == src_conn and e.dst_conn and e.dst_conn.startswith("IN_"):
            return "OUT_" + e.dst_conn[3:]
    conn = inner.next_connector(f"inl_{data}")
    inner.add_in_connector("IN_" + conn)
    inner.add_out_connector("OUT_" + conn)
    state.add_edge(
        src, src_conn, inner, "IN_" + conn, dace.Memlet.from_array(data, sdfg.arrays[data])
    )
    return "OUT_" + conn


def _drop_consumer_path(state: SDFGState, cand: InlineCandidate) -> None:
    """Remove the consumer connectors of the intermediate that no longer carry reads."""
    consumer = cand.consumer
    for oe in [e for e in state.out_edges(cand.intermediate) if e.dst is consumer]:
        out_conn = "OUT_" + oe.dst_conn[3:]
        if any(True for _ in state.out_edges_by_connector(consumer, out_conn)):
            continue
        state.remove_edge(oe)
        consumer.remove_in_connector(oe.dst_conn)
        consumer.remove_out_connector(out_conn)


def remove_dead_dataflow(sdfg: dace.SDFG, state: SDFGState, seeds, going=()) -> None:
    """Remove dead transients among `seeds` and, transitively, what only computed them.

    A top-level AccessNode is dead if nothing in this state reads it, its data is a
    transient, and no other AccessNode (any state; `going`: other states' AccessNodes
    the caller removes too) or interstate edge refers to it. Its
    writers go with it: a Map loses that output and the dataflow that only computed it
    (the whole Map if it has no output left); a copy source and a side-effect-free
    top-level tasklet are examined in turn.

    Args:
        sdfg: the SDFG, changed in place (unused transients removed from its arrays).
        state: the state holding `seeds`.
        seeds: the nodes to start from (AccessNodes or tasklets).
        going: AccessNodes of other states the caller removes too.
    """
    work = list(seeds)
    while work:
        node = work.pop()
        if node not in state.nodes() or state.out_degree(node) > 0:
            continue
        if isinstance(node, dn.Tasklet):
            if state.scope_dict()[node] is None and not node.has_side_effects(sdfg):
                work.extend(e.src for e in state.in_edges(node))
                state.remove_node(node)
            continue
        if isinstance(node, dn.AccessNode) and state.degree(node) == 0:
            state.remove_node(node)  # an isolated AccessNode moves no data
            _remove_unused_data(sdfg, {node.data})
            continue
        if not isinstance(node, dn.AccessNode) or not _is_dead_transient(sdfg, state, node, going):
            continue
        for e in list(state.in_edges(node)):
            if isinstance(e.src, dn.MapExit):
                work.extend(_detach_map_output(sdfg, state, e))
            else:
                state.remove_edge(e)
                work.append(e.src)
        state.remove_node(node)
        _remove_unused_data(sdfg, {node.data})


def _is_dead_transient(sdfg, state, node: dn.AccessNode, going=()) -> bool:
    desc = sdfg.arrays.get(node.data)
    if desc is None or not desc.transient:
        return False
    return not referenced_elsewhere(sdfg, node.data, (node, *going))


def _detach_map_output(sdfg, state, edge) -> list:
    """Remove one output of a Map and the dataflow inside that only served it.

    Returns the AccessNodes that fed the Map if the whole Map went away.
    """
    map_exit = edge.src
    map_entry = state.entry_node(map_exit)
    if all(e.dst is edge.dst for e in state.out_edges(map_exit)):
        scope = list(state.scope_subgraph(map_entry, include_entry=True, include_exit=True).nodes())
        sources = [e.src for e in state.in_edges(map_entry)]
        local = {n.data for n in scope if isinstance(n, dn.AccessNode)}
        state.remove_edge(edge)
        state.remove_nodes_from(scope)
        _remove_unused_data(sdfg, local)
        return sources
    conn = edge.src_conn
    state.remove_edge(edge)
    inner = list(state.in_edges_by_connector(map_exit, "IN_" + conn[4:]))
    for ie in inner:
        state.remove_edge(ie)
    map_exit.remove_in_connector("IN_" + conn[4:])
    map_exit.remove_out_connector(conn)
    remove_dead_scope_dataflow(
        sdfg, state, map_entry, removed=[(e, _dtype_of(sdfg, e)) for e in inner]
    )
    return []


def _dtype_of(sdfg, edge):
    desc = sdfg.arrays.get(edge.data.data) if edge.data.data else None
    return desc.dtype if desc is not None else None


def _close_connector(sdfg, state, map_entry, removed, dtype) -> None:
    """After `removed` (an edge into the MapExit) is gone, leave no dangling out-connector
    at its source: an entry connector is dropped, the output of a node that still computes
    other results (a tasklet with two outputs) is written to a dummy transient instead."""
    src, conn = removed.src, removed.src_conn
    if (
        conn is None
        or src not in state.nodes()
        or any(True for _ in state.out_edges_by_connector(src, conn))
    ):
        return
    if conn not in src.out_connectors or dtype is None:
        return  # already dropped, or an empty (ordering) edge
    if src is map_entry:
        _drop_unused_entry_connector(state, map_entry, conn)
        return
    name, sink = sdfg.add_array(
        f"__unused_{src.label}_{conn}",
        list(removed.data.subset.size()),
        dtype,
        transient=True,
        find_new_name=True,
    )
    state.add_edge(src, conn, state.add_access(name), None, dace.Memlet.from_array(name, sink))


def remove_dead_scope_dataflow(
    sdfg: dace.SDFG, state: SDFGState, map_entry: dn.MapEntry, removed=()
) -> None:
    """Delete nodes directly inside the Map whose results nobody uses (to a fixed point).

    `removed`: (edge, element type) of edges inside the Map the caller already deleted.
    The sources of those and of the edges deleted here keep no dangling out-connector
    (`_close_connector`).

    Args:
        sdfg: the SDFG, changed in place.
        state: the state holding the Map.
        map_entry: the Map's entry; only nodes directly in its scope are looked at.
        removed: as above.
    """
    removed = list(removed)
    changed = True
    while changed:
        changed = False
        scope = state.scope_dict()
        for n in [n for n in state.nodes() if scope[n] is map_entry]:
            if state.out_degree(n) != 0:
                continue
            if isinstance(n, dn.MapExit):
                continue
            if isinstance(n, dn.MapEntry):
                # A nested Map whose results nobody reads: drop it whole.
                inner = list(state.scope_subgraph(n, include_entry=True, include_exit=True).nodes())
                in_edges = [ie for ie in state.in_edges(n) if ie.src is map_entry]
            elif isinstance(n, dn.AccessNode):
                # A transient the removed output was copied through (MapFusion's scalars)
                # is dead once nothing reads it; a write to anything else is kept.
                if not sdfg.arrays[n.data].transient or referenced_elsewhere(sdfg, n.data, (n,)):
                    continue
                inner, in_edges = [n], list(state.in_edges(n))
            elif n.has_side_effects(sdfg):
                continue
            else:
                inner, in_edges = [n], [ie for ie in state.in_edges(n)]
            # Every edge into the removed nodes from outside them, not only `in_edges`.
            members = set(inner)
            cut = in_edges + [
                e
                for m in inner
                for e in state.in_edges(m)
                if e.src not in members and e not in in_edges
            ]
            for ie in cut:
                state.remove_edge(ie)
                removed.append((ie, _dtype_of(sdfg, ie)))
                if ie.src is map_entry and ie.src_conn and ie.src_conn.startswith("OUT_"):
                    _drop_unused_entry_connector(state, map_entry, ie.src_conn)
            local = {m.data for m in inner if isinstance(m, dn.AccessNode)}
            state.remove_nodes_from(inner)
            _remove_unused_data(sdfg, local)
            changed = True
            break
    for e, dtype in removed:
        _close_connector(sdfg, state, map_entry, e, dtype)


def _drop_unused_entry_connector(state, map_entry, out_conn) -> None:
    if any(True for _ in state.out_edges_by_connector(map_entry, out_conn)):
        return
    in_conn = "IN_" + out_conn[4:]
    sources = []
    for ie in list(state.in_edges_by_connector(map_entry, in_conn)):
        sources.append(ie.src)
        state.remove_edge(ie)
    map_entry.remove_in_connector(in_conn)
    map_entry.remove_out_connector(out_conn)
    _remove_isolated(state, sources)


def _remove_isolated(state, nodes) -> None:
    for n in nodes:
        if n in state.nodes() and state.degree(n) == 0 and isinstance(n, dn.AccessNode):
            state.remove_node(n)


def _remove_unused_data(sdfg, names) -> None:
    used = {n.data for st in sdfg.states() for n in st.data_nodes()}
    for name in names:
        if name in sdfg.arrays and name not in used and sdfg.arrays[name].transient:
            sdfg.remove_data(name, validate=False)
