"""Annotations carried from GTIR into the SDFG during gt4py's dace lowering.

After lowering, an SDFG no longer knows what gt4py's domain inference knew: on which
index range each program field is guaranteed to be valid, and where each
`concat_where` branch is selected. `record_annotations()` wraps gt4py's
`lower_program_to_sdfg` (`compat.LOWER_NAME`; no installed file is edited) and stores, on the data
descriptors, under `desc.location["gt4py_dace_xforms"]` (a JSON string; it survives
`to_json()/from_json()`, copies and renames, and the DaCe viewer shows it in the
container's properties):

- program fields: `{"kind": "field", "covers": [[lo, hi] | null, ...], "origin": [...],
  "dims": [...]}`: per dimension the program-index range `[lo, hi)` the program reads
  (domain inference, tuple targets included; the hull of every read whose range is
  known: a read through a neighbor table says nothing about its target dimension; the
  caller must pass a field at least that large), the range-start symbol that maps
  program to array indices (`array = program - origin`), and the dimension's name.
- concat nodes: `{"kind": "concat", "dim": d, "shape": [...], "branches": [{"selected":
  [lo, hi], "reads": {field: {dim: [lo, hi]}}}, ...]}`: array-index ranges along the
  concat dimension where each branch is selected, for the shape the array had at
  lowering, and what domain inference says the branch reads of each program field
  there (program indices; for reports, not for proofs: it is part of `covers`).

`analysis.annotations` reads them back; without them eager evaluation is never chosen.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any, Optional

import dace
from gt4py.next.iterator import ir as gtir
from gt4py.next.iterator.ir_utils import domain_utils
from gt4py.next.iterator.transforms import infer_domain
from gt4py.next.program_processors.runners.dace import sdfg_args as gtx_args
from gt4py.next.program_processors.runners.dace.lowering import gtir_domain, gtir_to_sdfg_utils

from gt4py_dace_xforms.integration import compat


KEY = "gt4py_dace_xforms"
_LOCK = threading.RLock()
_ORIGINAL_LOWER = compat.lowering_entry()


def _sym(expr) -> Optional[str]:
    if expr in (gtir.InfinityLiteral.POSITIVE, gtir.InfinityLiteral.NEGATIVE) or isinstance(
        expr, gtir.InfinityLiteral
    ):
        return None
    try:
        return str(gtir_to_sdfg_utils.get_symbolic(expr))
    except Exception:  # noqa: BLE001  # an expression we cannot print: no annotation
        return None


def _stmts(body):
    for stmt in body:
        if isinstance(stmt, gtir.SetAt):
            yield stmt
        elif isinstance(stmt, gtir.IfStmt):
            yield from _stmts(stmt.true_branch)
            yield from _stmts(stmt.false_branch)


def _flat_domains(dom) -> list:
    """The `SymbolicDomain`s in an accessed domain (a tuple for a tuple-valued field)."""
    if isinstance(dom, domain_utils.SymbolicDomain):
        return [dom]
    if isinstance(dom, tuple):
        return [d for part in dom for d in _flat_domains(part)]
    return []  # never accessed (`DomainAccessDescriptor`)


def _unknown_sizes(offset_provider_type) -> dict[str, gtir.Expr]:
    """A placeholder size for every dimension a neighbor table leads to.

    Domain inference translates a neighbor shift through the table's contents, which
    lowering does not have (only its type). With a size for the target dimension it
    takes `[0, size)` instead; the placeholder marks those ranges so that
    `field_coverage` drops them (nothing is claimed about a neighbor-read dimension)."""
    import gt4py.next.common as gtx_common

    sizes: dict[str, gtir.Expr] = {}
    for conn in (offset_provider_type or {}).values():
        if isinstance(conn, gtx_common.NeighborConnectivityType):
            sizes[conn.codomain.value] = gtir.SymRef(id=_UNKNOWN + conn.codomain.value)
    return sizes


_UNKNOWN = "__gx_neighbor_size_"


def field_coverage(ir: gtir.Program, offset_provider_type) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Per program field and dimension name, the hull of the ranges the program reads it on.

    A read through a neighbor table adds nothing to its target dimension (unknown).

    Args:
        ir: the GTIR program.
        offset_provider_type: the program's offset provider types (None: no neighbor tables).

    Returns:
        field name -> dimension name -> `(start, stop)` as printed expressions (a `Min`/`Max` over
            several ranges); fields or dimensions with no known range are left out.
    """
    params = {str(p.id) for p in ir.params}
    sizes = _unknown_sizes(offset_provider_type)
    covered: dict[str, dict[str, list]] = {}
    for stmt in _stmts(ir.body):
        try:
            # A tuple target (`make_tuple` of domains) is inferred per element, as gt4py does.
            domain = infer_domain._make_symbolic_domain_tuple(stmt.domain)
            _, accessed = infer_domain.infer_expr(
                stmt.expr,
                domain,
                offset_provider=offset_provider_type,
                symbolic_domain_sizes=sizes,
                allow_uninferred=True,
                keep_existing_domains=True,
            )
        except Exception:  # noqa: BLE001  # an expression inference rejects: skip, annotate less
            continue
        for name, dom in accessed.items():
            if name not in params:
                continue
            for one in _flat_domains(dom):
                for dim, rng in one.ranges.items():
                    covered.setdefault(name, {}).setdefault(dim.value, []).append(
                        (rng.start, rng.stop)
                    )
    result: dict[str, dict[str, tuple[Any, Any]]] = {}
    for name, dims in covered.items():
        for dim, ranges in dims.items():
            # Fields are contiguous, so a field read on several ranges covers their hull;
            # one range not known (a neighbor read, an expression we cannot print) just
            # contributes nothing.
            printed = [(_sym(s), _sym(e)) for s, e in ranges]
            known = [
                (s, e)
                for s, e in printed
                if s is not None and e is not None and _UNKNOWN not in s + e
            ]
            if not known:
                continue
            starts, stops = [s for s, _ in known], [e for _, e in known]
            lo = starts[0] if len(starts) == 1 else f"Min({', '.join(starts)})"
            hi = stops[0] if len(stops) == 1 else f"Max({', '.join(stops)})"
            result.setdefault(name, {})[dim] = (lo, hi)
    return result


def _annotate_fields(sdfg: dace.SDFG, ir: gtir.Program, offset_provider_type) -> None:
    import gt4py.next.common as gtx_common

    coverage = field_coverage(ir, offset_provider_type)
    for p in ir.params:
        name = str(p.id)
        desc = sdfg.arrays.get(name)
        dims = getattr(p.type, "dims", None)
        if desc is None or not dims or name not in coverage or len(dims) != len(desc.shape):
            continue
        covers, origin, names = [], [], []
        for dim in gtx_common.order_dimensions(dims):
            covers.append(list(coverage[name][dim.value]) if dim.value in coverage[name] else None)
            origin.append(str(gtx_args.range_start_symbol(name, dim)))
            names.append(dim.value)
        desc.location[KEY] = json.dumps(
            {"kind": "field", "covers": covers, "origin": origin, "dims": names}
        )


class _ConcatRecorder:
    """Wraps gt4py's `translate_concat_where` to note where each branch is selected."""

    def __init__(self, original):
        self.original = original

    def __call__(self, node, ctx, sdfg_builder):
        result = self.original(node, ctx, sdfg_builder)
        try:
            self._record(node, ctx, result, sdfg_builder)
        except Exception:  # noqa: BLE001  # never break lowering for an annotation
            pass
        return result

    @staticmethod
    def _record(node, ctx, result, sdfg_builder) -> None:
        mask = domain_utils.SymbolicDomain.from_expr(node.args[0])
        ((concat_dim, rng),) = mask.ranges.items()
        out_dom = node.annex.domain
        dims, origins, _ = gtir_domain.get_field_layout(gtir_domain.get_field_domain(out_dom))
        d = list(dims).index(concat_dim)
        out_rng = out_dom.ranges[concat_dim]
        start, stop = _sym(out_rng.start), _sym(out_rng.stop)
        infinite = (gtir.InfinityLiteral.POSITIVE, gtir.InfinityLiteral.NEGATIVE)
        bound = _sym(rng.stop if rng.start in infinite else rng.start)
        lower_first = rng.start in infinite  # the true branch is the lower one
        origin = str(origins[d])
        if None in (start, stop, bound):
            return
        lower = [f"({start}) - ({origin})", f"Max({start}, Min({bound}, {stop})) - ({origin})"]
        upper = [f"Max({start}, Min({bound}, {stop})) - ({origin})", f"({stop}) - ({origin})"]
        branches = (
            [lower, upper] if lower_first else [upper, lower]
        )  # in the order of node.args[1:]
        reads = _branch_reads(
            node, mask, ctx.sdfg, getattr(sdfg_builder, "offset_provider_type", None)
        )
        desc = ctx.sdfg.arrays[result.dc_node.data]
        desc.location[KEY] = json.dumps(
            {
                "kind": "concat",
                "dim": d,
                "shape": [str(s) for s in desc.shape],
                "branches": [
                    {"selected": [str(dace.symbolic.pystr_to_symbolic(x)) for x in b], "reads": r}
                    for b, r in zip(branches, reads)
                ],
            }
        )


def _branch_reads(node, mask, sdfg: dace.SDFG, offset_provider_type) -> list[dict]:
    """Per branch of a `concat_where` (in the order of `node.args[1:]`), what gt4py's
    domain inference says it reads of each program field: `{name: [[lo, hi) | None per
    dimension, in the field's order]}`. The branch is inferred on the output domain
    intersected with where it is selected, as gt4py's `concat_where` inference does."""
    out_dom = node.annex.domain
    sizes = _unknown_sizes(offset_provider_type)
    result = []
    for arg, selected in (
        (node.args[1], mask),
        (node.args[2], domain_utils.domain_complement(mask)),
    ):
        reads: dict = {}
        try:
            domain = domain_utils.domain_intersection(
                out_dom, domain_utils.promote_domain(selected, out_dom.ranges.keys())
            )
            _, accessed = infer_domain.infer_expr(
                arg,
                domain,
                offset_provider=offset_provider_type,
                symbolic_domain_sizes=sizes,
                allow_uninferred=True,
                keep_existing_domains=True,
            )
        except Exception:  # noqa: BLE001  # nothing known for this branch
            result.append(reads)
            continue
        for name, dom in accessed.items():
            desc = sdfg.arrays.get(name)
            doms = _flat_domains(dom)
            if desc is None or desc.transient or len(doms) != 1:
                continue
            for dim, rng in doms[0].ranges.items():
                lo, hi = _sym(rng.start), _sym(rng.stop)
                if lo is not None and hi is not None and _UNKNOWN not in lo + hi:
                    reads.setdefault(name, {})[dim.value] = [lo, hi]
        result.append(reads)
    return result


def annotating_lower_program_to_sdfg(ir, offset_provider_type, column_axis=None):
    """`lower_program_to_sdfg` plus the annotations described in this module.

    Args:
        ir: the GTIR program, as gt4py's lowering takes it.
        offset_provider_type: the program's offset provider types.
        column_axis: the vertical dimension, as gt4py's lowering takes it.

    Returns:
        the SDFG gt4py's lowering returns, with the annotations attached.
    """
    original = compat.concat_where_translator()
    with _LOCK:
        compat.set_concat_where_translator(_ConcatRecorder(original))
        try:
            sdfg = _ORIGINAL_LOWER(ir, offset_provider_type, column_axis)
        finally:
            compat.set_concat_where_translator(original)
    try:
        _annotate_fields(sdfg, ir, offset_provider_type)
    except Exception:  # noqa: BLE001  # annotations are optional: lowering must never fail for them
        pass
    return sdfg


@contextlib.contextmanager
def record_annotations():
    """While active, gt4py's dace lowering stores the annotations on the SDFGs it builds."""
    with _LOCK:
        previous = compat.lowering_entry()
        compat.set_lowering_entry(annotating_lower_program_to_sdfg)
        try:
            yield
        finally:
            compat.set_lowering_entry(previous)
