"""Reading the GTIR-carried annotations (see `integration.lowering`) back from an SDFG."""

from __future__ import annotations

import json
from typing import Iterable, Optional

import dace
import sympy

from gt4py_dace_xforms.analysis.symbolic import prove_zero, to_sympy

KEY = "gt4py_dace_xforms"  # the same key `integration.lowering` writes


def read(desc: dace.data.Data) -> Optional[dict]:
    text = getattr(desc, "location", {}).get(KEY)
    if not text:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def concat_annotation(sdfg: dace.SDFG, data: str) -> Optional[dict]:
    """The concat annotation of `data`, if present and recorded for its current shape.

    gt4py's passes may split or re-base a concat array; an annotation made for another
    shape says nothing about this one and is ignored.
    """
    desc = sdfg.arrays.get(data)
    ann = read(desc) if desc is not None else None
    if not ann or ann.get("kind") != "concat":
        return None
    shape = ann.get("shape", [])
    if len(shape) != len(desc.shape) or not all(prove_zero(to_sympy(a) - to_sympy(b)) for a, b in zip(shape, desc.shape)):
        return None
    return ann


def field_facts(sdfg: dace.SDFG, names: Iterable[str]) -> list[sympy.Expr]:
    """Facts (expressions >= 0) stating that each annotated program field covers what the
    program reads of it: per dimension `lo - origin >= 0` and `origin + size - hi >= 0`."""
    facts: list[sympy.Expr] = []
    for name in names:
        desc = sdfg.arrays.get(name)
        ann = read(desc) if desc is not None else None
        if not ann or ann.get("kind") != "field" or desc.transient:
            continue
        for rng, origin, size in zip(ann.get("covers", []), ann.get("origin", []), desc.shape):
            if not rng:
                continue
            o = to_sympy(origin)
            facts.append(to_sympy(rng[0]) - o)
            facts.append(o + to_sympy(size) - to_sympy(rng[1]))
    return facts
