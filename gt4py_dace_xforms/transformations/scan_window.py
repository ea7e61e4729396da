"""The scan window: copies a scan's loop evaluates at consecutive levels become one
evaluation per iteration and values carried from the iterations before (a k-cache;
analysis/scan_window.py says when; docs/scans.md).

`window_scan_copies` is the mutation of one `ScanWindowPlan`; the inlining rewrite calls
`window_template_copies` on the copies it has just put into a scan's nested SDFG
(`rewrite.inline_candidate`), so the cost of several copies per level is paid once per
level. There is no pattern-matching transformation: it is a step of the nested-read
rewrite, which knows which copies share a template.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.scan_window import ScanWindowPlan, scan_window_plan
from gt4py_dace_xforms.analysis.symbolic import to_sympy


def window_scan_copies(inner: dace.SDFG, plan: ScanWindowPlan) -> None:
    """A state before the loop evaluates the carried copies at the loop's first level into
    window scalars (the copies move there, their level bound to the loop's init); the loop
    state reads the window scalars in their place and, after every such read, one tasklet
    shifts the window (each carried value takes the one a level ahead of it, the nearest
    the lead's). All of it without control flow in the loop and without a transient read in
    one state and written in the next: gt4py's passes lift a guard on the loop variable of
    a downward loop as if it never held, and its state fusion asserts on such a pair.

    Args:
        inner: the scan's nested SDFG (holding the loop), changed in place.
        plan: the `ScanWindowPlan` (`analysis.scan_window`): the loop, the lead copy
            and the carried ones.
    """
    loop, st = plan.loop, plan.state
    v = dace.symbolic.symbol(plan.variable)
    window = {}
    for c in plan.carried:
        name, _ = inner.add_scalar(
            f"__win_{c.out.data.lstrip('_')}",
            inner.arrays[c.out.data].dtype,
            transient=True,
            find_new_name=True,
        )
        window[c.delta] = name

    region = loop.parent_graph
    fill = region.add_state_before(loop, f"window_fill_{st.label}")
    readers = []
    for c in plan.carried:
        inputs = [(e.src.data, e.dst_conn, e.data) for e in st.in_edges(c.node)]
        (out_conn,) = c.node.out_connectors
        old = c.out.data
        for e in list(st.in_edges(c.node)):
            st.remove_edge(e)
            if st.degree(e.src) == 0:
                st.remove_node(e.src)
        st.remove_node(c.node)
        # The state reads the window scalar where the copy's output was.
        c.out.data = window[c.delta]
        for e in st.out_edges(c.out):
            if e.data.data == old:
                e.data.data = window[c.delta]
            readers.append(e.dst)
        inner.remove_data(old, validate=False)
        node = c.node  # moved, not copied: the rewrite's list of its copies stays valid
        node.symbol_mapping = {
            k: to_sympy(x).subs(v, plan.init) for k, x in node.symbol_mapping.items()
        }
        fill.add_node(node)
        node.sdfg.parent, node.sdfg.parent_sdfg, node.sdfg.parent_nsdfg_node = fill, inner, node
        for data, conn, memlet in inputs:
            fill.add_edge(fill.add_access(data), None, node, conn, memlet)
        fill.add_edge(
            node,
            out_conn,
            fill.add_access(window[c.delta]),
            None,
            dace.Memlet(data=window[c.delta], subset="0"),
        )

    # The shift, after every read of the window in the state.
    outs: dict[str, str] = {}
    code: list[str] = []
    sources = {}
    for j, c in enumerate(plan.carried):
        src = plan.source(c)
        sources[f"__i{j}"] = src.out  # the lead's output, or the window scalar read above
        outs[f"__o{j}"] = window[c.delta]
        code.append(f"__o{j} = __i{j}")
    t = st.add_tasklet(
        f"window_shift_{st.label}", dict.fromkeys(sources), dict.fromkeys(outs), "\n".join(code)
    )
    for conn, node in sources.items():
        st.add_edge(node, None, t, conn, dace.Memlet(data=node.data, subset="0"))
    for conn, data in outs.items():
        st.add_edge(t, conn, st.add_access(data), None, dace.Memlet(data=data, subset="0"))
    for r in {id(r): r for r in readers}.values():
        after = st.exit_node(r) if isinstance(r, dn.EntryNode) else r
        if after is not t:
            st.add_edge(after, None, t, None, dace.Memlet())
    inner.root_sdfg.reset_cfg_list()


def window_template_copies(
    sdfg: dace.SDFG, node: dn.NestedSDFG, copies: Sequence[dn.NestedSDFG]
) -> int:
    """Window every set of `copies` that share a loop-body state and a plan: a step of the
    inlining rewrite, not a pass over an SDFG (hence no `gt_` name and no report).

    Args:
        sdfg: the SDFG holding `node`.
        node: the scan's nested SDFG.
        copies: nodes of one template inside `node`'s SDFG.

    Returns:
        The number of copies removed.
    """
    by_state = defaultdict(list)
    for c in copies:
        for st in node.sdfg.all_states():
            if c in st.nodes():
                by_state[st].append(c)
                break
    removed = 0
    for st, group in by_state.items():
        plan = scan_window_plan(node.sdfg, st, group)
        if isinstance(plan, Decline):
            continue
        window_scan_copies(node.sdfg, plan)
        removed += len(plan.carried)
    return removed
