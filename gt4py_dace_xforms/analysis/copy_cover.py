"""Does a copy cover a whole array? Proven over every value of the symbols.

gt4py sizes a temporary by its domain, `Max(0, vertical_end - Max(1, vertical_start))`,
and copies it with the bounds themselves, `[0 : -Max(1, vertical_start) + Max(1,
vertical_start, vertical_end)]`. The two are equal for every value of the symbols, but
not syntactically, and sympy's `Range.covers` (what gt4py's `CopyChainRemover` asks)
cannot see it without knowing `vertical_start <= vertical_end`: the nested
`concat_where` chains of icon4py's metrics programs stay as chains of copies.

`copy_covers_array` splits on the `Max`/`Min` terms (`analysis.symbolic.prove_any`).
For each symbol value, either the array is empty (some extent `<= 0`: the copy moves
nothing that exists) or, in every dimension, the copy starts at 0 and ends at the last
element exactly (unit stride). Exactly, not "at least": the rewrite that follows maps
element `x` of one array to element `x + offset` of the other, which is only the copy
when the two ranges have the same size.
"""

from __future__ import annotations

from typing import Sequence

from gt4py_dace_xforms.analysis.symbolic import prove_any, to_sympy


def copy_covers_array(subset, shape: Sequence) -> bool:
    """True if `subset` (a dace `Range`, inclusive ends) is all of an array of `shape`,
    or the array is empty, for every value of the symbols. False when not proven
    (including non-unit strides, tiles and a rank mismatch).

    Args:
        subset: the copy's subset.
        shape: the array's shape.

    Returns:
        True where proven.
    """
    ranges = list(getattr(subset, "ranges", ()))
    if len(ranges) != len(shape) or any(getattr(subset, "tile_sizes", [1] * len(ranges))[d] != 1
                                        for d in range(len(ranges))):  # fmt: skip
        return False
    try:
        extents = [to_sympy(s) for s in shape]
        exact: list = []
        for (first, last, step), extent in zip(ranges, extents):
            if to_sympy(step) != 1:
                return False
            first, last = to_sympy(first), to_sympy(last)
            exact += [first, -first, last - extent + 1, extent - 1 - last]
        empty = [[-extent] for extent in extents]
        return prove_any([*empty, exact])
    except Exception:  # noqa: BLE001  # an expression sympy cannot take is "not proven"
        return False
