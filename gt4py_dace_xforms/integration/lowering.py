"""Annotations carried from GTIR into the SDFG during gt4py's dace lowering.

After lowering, an SDFG no longer knows what gt4py's domain inference knew: on which
index range each program field is guaranteed to be valid, and where each
`concat_where` branch is selected. `record_annotations()` wraps gt4py's
`lower_program_to_sdfg` (no installed file is edited) and stores, on the data
descriptors, under `desc.location["gt4py_dace_xforms"]` (a JSON string; it survives
`to_json()/from_json()`, copies and renames, and the DaCe viewer shows it in the
container's properties):

- program fields: `{"kind": "field", "covers": [[lo, hi] | null, ...], "origin": [...]}`:
  per dimension the program-index range `[lo, hi)` the program reads (domain inference;
  the caller must pass a field at least that large) and the range-start symbol that
  maps program to array indices (`array = program - origin`).
- concat nodes: `{"kind": "concat", "dim": d, "shape": [...], "branches": [{"selected":
  [lo, hi]}, ...]}`: array-index ranges along the concat dimension where each branch
  is selected, for the shape the array had at lowering.

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
from gt4py.next.program_processors.runners.dace import lowering as gtx_lowering, sdfg_args as gtx_args
from gt4py.next.program_processors.runners.dace.lowering import gtir_domain, gtir_to_sdfg, gtir_to_sdfg_utils

KEY = "gt4py_dace_xforms"
_LOCK = threading.RLock()
_ORIGINAL_LOWER = gtx_lowering.lower_program_to_sdfg


def _sym(expr) -> Optional[str]:
    if expr in (gtir.InfinityLiteral.POSITIVE, gtir.InfinityLiteral.NEGATIVE) or isinstance(expr, gtir.InfinityLiteral):
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


def field_coverage(ir: gtir.Program, offset_provider_type) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Per program field and dimension name, the union of the ranges the program reads it on."""
    params = {str(p.id) for p in ir.params}
    covered: dict[str, dict[str, list]] = {}
    for stmt in _stmts(ir.body):
        try:
            domain = domain_utils.SymbolicDomain.from_expr(stmt.domain)
            _, accessed = infer_domain.infer_expr(
                stmt.expr, domain, offset_provider=offset_provider_type, allow_uninferred=True,
                keep_existing_domains=True,
            )
        except Exception:  # noqa: BLE001  # tuple targets and the like: skip, annotate less
            continue
        for name, dom in accessed.items():
            if name not in params or not isinstance(dom, domain_utils.SymbolicDomain):
                continue
            for dim, rng in dom.ranges.items():
                covered.setdefault(name, {}).setdefault(dim.value, []).append((rng.start, rng.stop))
    result: dict[str, dict[str, tuple[Any, Any]]] = {}
    for name, dims in covered.items():
        for dim, ranges in dims.items():
            starts = [_sym(s) for s, _ in ranges]
            stops = [_sym(e) for _, e in ranges]
            if None in starts or None in stops:
                continue
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
        covers, origin = [], []
        for dim in gtx_common.order_dimensions(dims):
            covers.append(list(coverage[name][dim.value]) if dim.value in coverage[name] else None)
            origin.append(str(gtx_args.range_start_symbol(name, dim)))
        desc.location[KEY] = json.dumps({"kind": "field", "covers": covers, "origin": origin})


class _ConcatRecorder:
    """Wraps gt4py's `translate_concat_where` to note where each branch is selected."""

    def __init__(self, original):
        self.original = original

    def __call__(self, node, ctx, sdfg_builder):
        result = self.original(node, ctx, sdfg_builder)
        try:
            self._record(node, ctx, result)
        except Exception:  # noqa: BLE001  # never break lowering for an annotation
            pass
        return result

    @staticmethod
    def _record(node, ctx, result) -> None:
        mask = domain_utils.SymbolicDomain.from_expr(node.args[0])
        (concat_dim, rng), = mask.ranges.items()
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
        branches = [lower, upper] if lower_first else [upper, lower]  # in the order of node.args[1:]
        desc = ctx.sdfg.arrays[result.dc_node.data]
        desc.location[KEY] = json.dumps(
            {
                "kind": "concat",
                "dim": d,
                "shape": [str(s) for s in desc.shape],
                "branches": [{"selected": [str(dace.symbolic.pystr_to_symbolic(x)) for x in b]} for b in branches],
            }
        )


def annotating_lower_program_to_sdfg(ir, offset_provider_type, column_axis=None):
    """`lower_program_to_sdfg` plus the annotations described in this module."""
    translators = gtir_to_sdfg._BUILTIN_TRANSLATORS
    original = translators["concat_where"]
    with _LOCK:
        translators["concat_where"] = _ConcatRecorder(original)
        try:
            sdfg = _ORIGINAL_LOWER(ir, offset_provider_type, column_axis)
        finally:
            translators["concat_where"] = original
    try:
        _annotate_fields(sdfg, ir, offset_provider_type)
    except Exception:  # noqa: BLE001  # annotations are optional: lowering must never fail for them
        pass
    return sdfg


@contextlib.contextmanager
def record_annotations():
    """While active, gt4py's dace lowering stores the annotations on the SDFGs it builds."""
    with _LOCK:
        previous = gtx_lowering.lower_program_to_sdfg
        gtx_lowering.lower_program_to_sdfg = annotating_lower_program_to_sdfg
        try:
            yield
        finally:
            gtx_lowering.lower_program_to_sdfg = previous
