"""Reading the GTIR-carried annotations (see `integration.lowering`) back from an SDFG."""

from __future__ import annotations

import json
from typing import Iterable, Optional

import dace
import sympy

from gt4py_dace_xforms.analysis.symbolic import prove_any, prove_zero, to_sympy


KEY = "gt4py_dace_xforms"  # the same key `integration.lowering` writes


def read(desc: dace.data.Data) -> Optional[dict]:
    """The library's annotation stored on a data descriptor (JSON under `KEY` in its `location`),
    or None where it has none or it does not parse.

    Args:
        desc: the data descriptor.

    Returns:
        the annotation, or None.
    """
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

    Args:
        sdfg: the SDFG.
        data: the concat array's name.

    Returns:
        the annotation, or None.
    """
    desc = sdfg.arrays.get(data)
    ann = read(desc) if desc is not None else None
    if not ann or ann.get("kind") != "concat":
        return None
    shape = ann.get("shape", [])
    if len(shape) != len(desc.shape) or not all(
        prove_zero(_reparsed(a) - _reparsed(b)) for a, b in zip(shape, desc.shape)
    ):
        return None
    return ann


def _reparsed(expr) -> sympy.Expr:
    """`expr` parsed from its text. An SDFG read from a file may hold sums whose terms
    are not in sympy's canonical order, and then `Max(0, a - b)` and its own reprint
    are different atoms that never cancel."""
    return to_sympy(str(expr))


def concat_branches(ann: dict, branches) -> Optional[list[Optional[dict]]]:
    """Per analysed branch (`analysis.concat.Branch`), the annotated branch it belongs
    to: the one whose selected range holds its region along the concat dimension
    (gt4py may split one branch into several writers); `None` where that is not provable
    for exactly one (an empty region is held by every range).

    Args:
        ann: the concat annotation (`concat_annotation`).
        branches: the analysed branches.

    Returns:
        one annotated branch (or None) per analysed branch, or None where the annotation names no
            branches or dimension, or a branch lacks that dimension.
    """
    d = ann.get("dim")
    annotated = ann.get("branches", [])
    if not isinstance(d, int) or not annotated:
        return None
    result: list[Optional[dict]] = []
    for br in branches:
        if d >= len(br.region):
            return None
        lo, hi = (_reparsed(x) for x in br.region[d])
        # Holds the region, or the region is empty (`selected` is half-open).
        holding = [
            a
            for a in annotated
            if prove_any(
                [
                    [lo - _reparsed(a["selected"][0]), _reparsed(a["selected"][1]) - 1 - hi],
                    [lo - hi - 1],
                ]
            )
        ]
        result.append(holding[0] if len(holding) == 1 else None)
    return result


def branch_reads(info: Optional[dict], field: Optional[dict], name: str) -> Optional[list]:
    """What gt4py's domain inference says the annotated branch `info` reads of the
    program field `name` in the dimension `field` (from `field_dim`) describes
    (`[lo, hi)`, program indices), if recorded.

    Args:
        info: the annotated branch (None: not annotated).
        field: the field's annotation in that dimension (`field_dim`).
        name: the program field's name.

    Returns:
        the recorded `[lo, hi)` ranges, or None.
    """
    if not info or not field:
        return None
    return info.get("reads", {}).get(name, {}).get(field.get("name"))


def field_dim(sdfg: dace.SDFG, name: str, dim: int) -> Optional[dict]:
    """The field annotation of program data `name` in dimension `dim`:
    `{"covers": [lo, hi] | None, "origin": o, "name": dimension name}`, if annotated.

    Args:
        sdfg: the SDFG.
        name: the program data's name.
        dim: the dimension's index.

    Returns:
        the dimension's annotation, or None.
    """
    desc = sdfg.arrays.get(name)
    ann = read(desc) if desc is not None else None
    if not ann or ann.get("kind") != "field" or desc.transient:
        return None
    covers, origin, names = ann.get("covers", []), ann.get("origin", []), ann.get("dims", [])
    if dim >= len(covers):
        return None
    return {
        "covers": covers[dim],
        "origin": origin[dim],
        "name": names[dim] if dim < len(names) else None,
    }


def field_facts(sdfg: dace.SDFG, names: Iterable[str]) -> list[sympy.Expr]:
    """Facts (expressions >= 0) stating that each annotated program field covers what the
    program reads of it: per dimension `lo - origin >= 0` and `origin + size - hi >= 0`.

    Args:
        sdfg: the SDFG.
        names: the program data to state facts for.

    Returns:
        the facts, for the provers' `facts`.
    """
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
