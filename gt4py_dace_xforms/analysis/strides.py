"""Whether the program's horizontal dimension is laid out with unit stride: what decides
whether the CPU code gt4py generates vectorizes along it.

gt4py's dace backend leaves every field argument's strides symbolic
(`__<field>_<Dim>_stride`) unless the backend is told that the unstructured horizontal
dimension has unit stride (`unstructured_horizontal_has_unit_stride`, which icon4py's
backend factory sets): then that stride is the literal 1 in the SDFG. Read from the SDFG
alone, so that the cost model prices the build it is given, whichever backend made it.
"""

from __future__ import annotations

import re
from typing import Optional

import dace


_HORIZONTAL_STRIDE = re.compile(r"__\w+_(Cell|Edge|Vertex)_stride")


def horizontal_unit_stride(sdfg: dace.SDFG) -> Optional[bool]:
    """Whether every field argument of `sdfg` has unit stride in its horizontal dimension.

    Args:
        sdfg: the program's top-level SDFG.

    Returns:
        False where some argument's horizontal stride is gt4py's stride symbol (the build
        does not assume unit stride), True where arguments with a horizontal dimension exist
        and none has such a symbol, None where no argument names a horizontal stride
        symbol and none can be told apart (no horizontal field arguments at all).
    """
    seen_horizontal = False
    for desc in sdfg.arrays.values():
        if desc.transient or len(desc.shape) < 2:
            continue
        for stride in desc.strides:
            symbols = {str(s) for s in getattr(stride, "free_symbols", ())}
            if any(_HORIZONTAL_STRIDE.fullmatch(s) for s in symbols):
                return False
        if any(f"_{dim}_" in str(s) for dim in ("Cell", "Edge", "Vertex") for s in desc.shape):
            seen_horizontal = True
    return True if seen_horizontal else None
