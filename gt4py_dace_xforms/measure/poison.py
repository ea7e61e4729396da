"""Inputs poisoned outside what the program reads, so that a read outside it shows.

gt4py's domain inference says on which index range a program reads each field; the
library records it on the SDFG (`integration.lowering`, `covers`). `poison_unread()`
copies a program's arguments and sets every element of a field outside that range to a
poison value (NaN by default). A build that reads only what the program reads computes
the same outputs as with the clean inputs; one that lets an element outside reach an
output (a concat branch selected outside its region, a read at a wrong shift) turns it
into NaN there, which a comparison with stock shows.

Eager concat evaluation reads outside a branch's region by design and discards the
value; those reads stay within `covers` (that is what `eager_verdict` proves) and the
discarded results never reach an output, so poison does not flag them.
"""

from __future__ import annotations

from typing import Any, Mapping

import dace
import numpy as np

# not `annotations`: `from __future__ import annotations` binds that name too
from gt4py_dace_xforms.analysis import annotations as data_annotations
from gt4py_dace_xforms.analysis.symbolic import to_sympy


def unread_mask(
    sdfg: dace.SDFG, name: str, field: Any, values: Mapping[str, int]
) -> np.ndarray | None:
    """Elements of `field` (a gt4py field passed as `name`) the program does not read: a
    boolean array, or `None` if `name` is not annotated. A dimension whose range is not
    annotated, or whose bounds depend on a symbol not in `values`, is taken as read whole.

    Args:
        sdfg: the annotated SDFG.
        name: the field's parameter name.
        field: the gt4py field.
        values: symbol name -> value.

    Returns:
        the mask (True: not read), or None.
    """
    desc = sdfg.arrays.get(name)
    ann = data_annotations.read(desc) if desc is not None else None
    if not ann or ann.get("kind") != "field":
        return None
    covers = ann.get("covers", [])
    if len(covers) != field.ndarray.ndim:
        return None
    read = np.ones(field.ndarray.shape, dtype=bool)
    for d, (rng, dim_range) in enumerate(zip(covers, field.domain.ranges)):
        if not rng:
            continue
        bounds = [to_sympy(x) for x in rng]
        bounds = [
            b.subs({s: values[str(s)] for s in b.free_symbols if str(s) in values}) for b in bounds
        ]
        if any(not b.is_Integer for b in bounds):
            continue
        index = np.arange(dim_range.start, dim_range.stop)
        inside = (index >= int(bounds[0])) & (index < int(bounds[1]))
        shape = [1] * field.ndarray.ndim
        shape[d] = -1
        read &= inside.reshape(shape)
    return ~read


def poison_unread(
    sdfg: dace.SDFG, args: Mapping[str, Any], value: float = float("nan")
) -> dict[str, Any]:
    """A copy of `args` (as passed to the program) in which every annotated field holds
    `value` outside the range the program reads of it (`unread_mask`); the program's
    integer arguments give the symbols' values.

    Args:
        sdfg: the annotated SDFG.
        args: the program's arguments.
        value: the value written where nothing is read.

    Returns:
        the arguments, poisoned fields copied.
    """
    import gt4py.next as gtx

    values = {k: int(v) for k, v in args.items() if isinstance(v, (int, np.integer))}
    result: dict[str, Any] = {}
    for name, v in args.items():
        if not hasattr(v, "asnumpy"):
            result[name] = v
            continue
        data = v.asnumpy().copy()
        mask = unread_mask(sdfg, name, v, values)
        if mask is not None and np.issubdtype(data.dtype, np.floating):
            data[mask] = value
        result[name] = gtx.as_field(v.domain, data)
    return result
