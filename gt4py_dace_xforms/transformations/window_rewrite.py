"""Graph mutation for vertical windows: sweep a consumer in K, one producer evaluation per level.

Executes a `WindowPlan` (`analysis.window`); every decision was made before. The consumer
Map over (horizontal..., kp) keeps its horizontal parameters; its body moves into a
nested SDFG that loops over kp:

```
w = [0] * (n - 1)                                  # registers: the last n - 1 levels
for kp in range(k_first - (n - 1), k_first):       # fill
    v = T(kp + dmax); w = w[1:] + [v]
for kp in range(k_first, k_last + 1):              # sweep
    v = T(kp + dmax)                               # the one evaluation per level
    body, reading T(kp + dmin + s) as w[s] (s < n - 1) or v (s = n - 1)
    w = w[1:] + [v]                                # after the body (ordering edges)
```

Each loop body is one state, and the window's update is ordered after every read of it
by edges, not by a state boundary: DaCe's state fusion merged an `update` state into the
`body` state before it with nothing ordering the reads before the writes, and the code
generator then emitted the update first.

`T(...)` is the inliner's per-element evaluation (`rewrite.element_template`, bound like
the read at the largest distance). Inputs enter the nested SDFG whole (as gt4py passes a
scan's columns), outputs as the column the consumer writes per horizontal point (as a
scan's outputs), so the Map's outer memlets stay exact.
"""

from __future__ import annotations

import copy

import dace
import sympy
from dace import subsets as dace_sbs
from dace.sdfg import nodes as dn
from dace.sdfg.state import LoopRegion

from gt4py_dace_xforms.analysis.window import WindowPlan
from gt4py_dace_xforms.transformations import rewrite


#: The window's array inside the nested SDFG (the last n - 1 levels), and the new level.
WINDOW = "__window_{}"
LEVEL = "__level_{}"


def window_candidate(sdfg: dace.SDFG, plan: WindowPlan) -> dn.NestedSDFG:
    """Rewrite the consumer of `plan` into a K sweep.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `WindowPlan` (`analysis.window`): the candidate, the window's width and
            the K range swept.

    Returns:
        The nested SDFG node that holds the sweep in the consumer Map.
    """
    cand = plan.cand
    state, entry = cand.state, cand.consumer
    exit_ = state.exit_node(entry)
    scope = state.scope_dict()
    body = [n for n in state.nodes() if scope[n] is entry and n is not exit_]
    name = cand.intermediate.data
    inputs = _body_inputs(state, entry, name)
    in_conns = rewrite.pass_inputs(sdfg, cand)  # the producer's inputs, new connector pairs

    inner = dace.SDFG(f"window_{name}")
    for data in sorted(set(inputs) | set(in_conns)):
        rewrite._add_inputs(inner, sdfg, [data])
    columns = {c.data: c for c in plan.outputs}
    for col in plan.outputs:
        outer = sdfg.arrays[col.data]
        inner.add_array(
            col.data,
            [plan.k_last - plan.k_first + 1],
            outer.dtype,
            strides=[outer.strides[col.dim]],
        )
    locals_ = {n.data for n in body if isinstance(n, dn.AccessNode)} - set(inputs) - set(columns)
    for data in sorted(locals_):
        inner.add_datadesc(data, copy.deepcopy(sdfg.arrays[data]))
    dtype = sdfg.arrays[name].dtype
    window, level = WINDOW.format(name), LEVEL.format(name)
    # Registers, allocated once per column: a state-scoped transient would be allocated (and
    # lost) in every state of the loop.
    inner.add_array(
        window,
        [plan.width - 1],
        dtype,
        transient=True,
        storage=dace.StorageType.Register,
        lifetime=dace.AllocationLifetime.SDFG,
    )
    inner.add_scalar(level, dtype, transient=True, storage=dace.StorageType.Register)
    template = rewrite.element_template(sdfg, cand)
    binding = rewrite.element_binding(cand, plan.top)

    kp, n = plan.kparam, plan.width
    first, last = dace.symbolic.symstr(plan.k_first), dace.symbolic.symstr(plan.k_last)
    init = inner.add_state("init", is_start_block=True)
    _emit_clear(init, window, n)
    fill = LoopRegion(
        "fill_window", f"{kp} < {first}", kp, f"{kp} = {first} - {n - 1}", f"{kp} = {kp} + 1"
    )
    sweep = LoopRegion("sweep", f"{kp} <= {last}", kp, f"{kp} = {first}", f"{kp} = {kp} + 1")
    inner.add_node(fill)
    inner.add_node(sweep)
    inner.add_edge(init, fill, dace.InterstateEdge())
    inner.add_edge(fill, sweep, dace.InterstateEdge())
    for region, with_body in ((fill, False), (sweep, True)):
        st = region.add_state("level", is_start_block=True)
        value = _emit_evaluation(inner, st, template, binding, level, in_conns)
        held = st.add_access(window)
        after = []
        if with_body:
            after = _copy_body(sdfg, state, entry, exit_, body, st, plan, held, value, columns)
        _emit_shift(st, held, value, window, n, after)
        if st.degree(held) == 0:
            st.remove_node(held)  # a window of one level is only written here
    inner.using_explicit_control_flow = True

    names = {str(s) for s in inner.free_symbols} | set(entry.map.params) - {kp}
    rewrite._symbol_table(inner, sdfg, names - {kp})
    # One feed per input: the producer's connector where both read it (its source keeps the
    # producer's order), else the body's own.
    feeds = {
        data: in_conns.get(data) or inputs[data] for data in sorted(set(inputs) | set(in_conns))
    }
    node = state.add_nested_sdfg(
        inner,
        dict.fromkeys(feeds),
        dict.fromkeys(sorted(columns)),
        symbol_mapping={s: s for s in inner.symbols},
        name=f"window_{name}",
    )
    for data, conn in feeds.items():
        state.add_edge(entry, conn, node, data, dace.Memlet.from_array(data, sdfg.arrays[data]))
    for data, col in sorted(columns.items()):
        conn = _exit_connector(state, exit_, data)
        state.add_edge(node, data, exit_, conn, dace.Memlet(data=data, subset=_column(plan, col)))
    if not feeds:
        state.add_edge(entry, None, node, None, dace.Memlet())
    _restructure(sdfg, state, entry, exit_, body, plan, set(feeds.values()))
    rewrite.drop_intermediate(sdfg, cand)
    rewrite._remove_unused_data(sdfg, locals_)
    return node


def _body_inputs(state, entry, intermediate: str) -> dict[str, str]:
    """Data the body reads through the consumer's connectors (not the intermediate): data ->
    the `OUT_` connector that will feed the nested SDFG (the first, if several)."""
    found: dict[str, str] = {}
    for e in state.out_edges(entry):
        if e.data.is_empty() or e.data.data == intermediate or e.src_conn is None:
            continue
        found.setdefault(e.data.data, e.src_conn)
    return found


def _emit_evaluation(inner, st, template, binding, level, in_conns) -> dn.AccessNode:
    """`level = T(kp + dmax)`: a copy of the element template; returns the AccessNode."""
    nsdfg = copy.deepcopy(template)
    mapping = {s: s for s in nsdfg.symbols}
    mapping.update(binding)
    node = st.add_nested_sdfg(
        nsdfg,
        dict.fromkeys(sorted(in_conns)),
        {rewrite.INLINE_OUTPUT: None},
        symbol_mapping=mapping,
        name="evaluate_level",
    )
    for data in sorted(in_conns):
        st.add_edge(
            st.add_access(data), None, node, data, dace.Memlet.from_array(data, inner.arrays[data])
        )
    value = st.add_access(level)
    st.add_edge(node, rewrite.INLINE_OUTPUT, value, None, dace.Memlet(data=level, subset="0"))
    return value


def _emit_clear(st, window, n) -> None:
    """Zeros into the window: the fill shifts its first slots out unread, but DaCe warns
    about (and a reader could not tell apart) a transient read before it is written."""
    code = "\n".join(f"__o{m} = 0" for m in range(n - 1))
    t = st.add_tasklet("clear_window", {}, {f"__o{m}": None for m in range(n - 1)}, code)
    cleared = st.add_access(window)
    for m in range(n - 1):
        st.add_edge(t, f"__o{m}", cleared, None, dace.Memlet(data=window, subset=str(m)))


def _emit_shift(st, held, value, window, n, after) -> None:
    """`window = window[1:] + [level]`, in one tasklet (inputs read first) that runs after
    every node in `after` (the body's writes: empty edges order it after all reads)."""
    code = "\n".join(f"__o{m} = __i{m + 1}" for m in range(n - 1))
    t = st.add_tasklet(
        "shift_window",
        {f"__i{m}": None for m in range(1, n)},
        {f"__o{m}": None for m in range(n - 1)},
        code,
    )
    for m in range(1, n - 1):
        st.add_edge(held, None, t, f"__i{m}", dace.Memlet(data=window, subset=str(m)))
    st.add_edge(value, None, t, f"__i{n - 1}", dace.Memlet(data=value.data, subset="0"))
    updated = st.add_access(window)
    for m in range(n - 1):
        st.add_edge(t, f"__o{m}", updated, None, dace.Memlet(data=window, subset=str(m)))
    for node in after:
        st.add_nedge(node, t, dace.Memlet())


def _copy_body(sdfg, state, entry, exit_, body, st, plan: WindowPlan, held, value, columns) -> list:
    """The consumer's body in `st`: reads of the intermediate from the window (`held`, the
    last level from `value`), other inputs from their whole arrays, outputs into their
    columns (rebased to the column's start). Returns the nodes written last (the sinks)."""
    name = plan.cand.intermediate.data
    copies = {}
    for node in body:
        new = copy.deepcopy(node)
        copies[node] = new
        st.add_node(new)
        if isinstance(node, dn.NestedSDFG):
            new.sdfg.parent, new.sdfg.parent_sdfg, new.sdfg.parent_nsdfg_node = st, st.sdfg, new
    sources: dict[str, dn.AccessNode] = {}
    sinks: dict[str, dn.AccessNode] = {}
    kp = dace.symbolic.symbol(plan.kparam)
    for node in body:
        for e in state.in_edges(node):
            if e.src is entry:
                if e.data.is_empty():
                    continue
                data = e.data.data
                if data == name:
                    slot = plan.slot_of_edge(e)
                    src = held if slot < plan.width - 1 else value
                    memlet = dace.Memlet(data=src.data, subset=str(slot) if src is held else "0")
                else:
                    src = sources.get(data) or sources.setdefault(data, st.add_access(data))
                    memlet = copy.deepcopy(e.data)
                st.add_edge(src, None, copies[node], e.dst_conn, memlet)
            else:
                st.add_edge(
                    copies[e.src], e.src_conn, copies[node], e.dst_conn, copy.deepcopy(e.data)
                )
        for e in state.out_edges(node):
            if e.dst is not exit_ or e.data.is_empty():
                continue
            col = columns[e.data.data]
            dst = sinks.get(col.data) or sinks.setdefault(col.data, st.add_access(col.data))
            level = sympy.expand(kp - plan.k_first)  # the column starts at k_first + offset
            st.add_edge(
                copies[node],
                e.src_conn,
                dst,
                None,
                dace.Memlet(data=col.data, subset=dace.symbolic.symstr(level)),
            )
    return list(sinks.values())


def _restructure(sdfg, state, entry, exit_, body, plan: WindowPlan, used: set) -> None:
    """Remove the body from the state, drop the swept parameter from the Map, and make the
    Map's input memlets whole arrays (the nested SDFG indexes them absolutely)."""
    for node in body:
        state.remove_node(node)
    cmap = entry.map
    keep = [i for i, p in enumerate(cmap.params) if p != plan.kparam]
    ranges = cmap.range.ranges
    cmap.params = [cmap.params[i] for i in keep]
    cmap.range = dace_sbs.Range([ranges[i] for i in keep])
    for e in list(state.in_edges(entry)):
        if e.dst_conn and e.dst_conn.startswith("IN_") and "OUT_" + e.dst_conn[3:] in used:
            e.data = dace.Memlet.from_array(e.data.data, sdfg.arrays[e.data.data])
    for conn in [c for c in entry.out_connectors if c.startswith("OUT_") and c not in used]:
        if not any(True for _ in state.out_edges_by_connector(entry, conn)):
            if not any(
                e.dst_conn == "IN_" + conn[4:] and e.data.data == plan.cand.intermediate.data
                for e in state.in_edges(entry)
            ):
                rewrite._drop_unused_entry_connector(state, entry, conn)


def _exit_connector(state, exit_, data: str) -> str:
    """The MapExit's `IN_` connector whose outer edge writes `data`."""
    for e in state.out_edges(exit_):
        if e.data.data == data and e.src_conn and e.src_conn.startswith("OUT_"):
            return "IN_" + e.src_conn[4:]
    raise ValueError(f"window: no exit connector writes '{data}'")


def _column(plan: WindowPlan, col) -> dace_sbs.Range:
    """The column of `col.data` one horizontal point writes: the body's write index in the
    other dimensions, `[k_first + offset, k_last + offset]` in the swept one."""
    return dace_sbs.Range(
        [
            (plan.k_first + col.offset, plan.k_last + col.offset, 1) if d == col.dim else (x, x, 1)
            for d, x in enumerate(col.index)
        ]
    )
