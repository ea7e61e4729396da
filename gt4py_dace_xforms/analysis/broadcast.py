"""Concat branches copied from lower-dimensional data (a Cell-only field broadcast over K).

gt4py lowers `concat_where(K < 1, cell_field, interior)` with a copy `c[0:n] -> T[0:n, 0]`:
the source has fewer dimensions than the concat node, and the node's extra dimensions
have extent 1 on that copy. gt4py 1.2.3's own replacement of such a node
(`ConcatWhereCopyToMap`, `_replace_single_read`) indexes the source's subset by the
node's dimensions and raises `IndexError`, so the library must take these nodes itself.
"""

from __future__ import annotations

import itertools
from typing import Optional, Sequence

import sympy

from gt4py_dace_xforms.analysis.symbolic import prove_nonnegative, to_sympy


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    return prove_nonnegative(a - b) is True and prove_nonnegative(b - a) is True


def copy_dims(dst_sizes: Sequence, src_sizes: Sequence) -> Optional[tuple[Optional[int], ...]]:
    """Per destination dimension, the source dimension it copies, or None for a
    destination dimension of extent 1 the source does not have.

    Equal ranks: the identity if every extent is provably equal. Fewer source
    dimensions: the source's dimensions in order, matched to destination dimensions of
    provably equal extent, every other destination dimension provably of extent 1 (an
    element there has one index, so which extent-1 dimension is dropped does not change
    what is read). None if no such matching is provable.

    Args:
        dst_sizes: the destination's extents.
        src_sizes: the source's extents.

    Returns:
        the source dimension per destination dimension, or None where no mapping is proven.
    """
    dst = [to_sympy(x) for x in dst_sizes]
    src = [to_sympy(x) for x in src_sizes]
    if len(src) > len(dst):
        return None
    for kept in itertools.combinations(range(len(dst)), len(src)):
        dropped = [d for d in range(len(dst)) if d not in kept]
        if all(_equal(dst[d], s) for d, s in zip(kept, src)) and all(
            _equal(dst[d], sympy.Integer(1)) for d in dropped
        ):
            mapping: list[Optional[int]] = [None] * len(dst)
            for j, d in enumerate(kept):
                mapping[d] = j
            return tuple(mapping)
    return None


def is_broadcast(mapping: Sequence[Optional[int]]) -> bool:
    """The copy drops destination dimensions (its source has fewer).

    Args:
        mapping: the result of `copy_dims`.

    Returns:
        True where a destination dimension has no source dimension.
    """
    return any(m is None for m in mapping)


def gt4py_replacement_fails(sdfg, cand) -> bool:
    """A branch of `cand`'s concat node copies from data of lower rank than the node:
    gt4py 1.2.3's concat_where replacement raises on such a node, so it must not be left
    to it (cost models decline copy-fed concat nodes otherwise).

    Args:
        sdfg: the SDFG.
        cand: the inline candidate with a concat node.

    Returns:
        True where gt4py's replacement would raise on the node.
    """
    if cand.concat is None:
        return False
    rank = len(sdfg.arrays[cand.intermediate.data].shape)
    # Every writer: gt4py's replacement takes the node, not the reads.
    return any(
        b.source is not None and len(sdfg.arrays[b.source.data].shape) < rank
        for b in cand.concat.writers
    )
