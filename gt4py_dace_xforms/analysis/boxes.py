"""One prover of boxes: containment, disjointness, cover by a union of pieces, selection.

gt4py splits a temporary into pieces wherever domains differ: along K for a
`concat_where(KDim < 1, ...)`, and along Cell or Edge as readily (a decomposed rank's
halo, a limited-area grid's boundary zones), so a piece is a box in any number of
dimensions. Every rewrite that reasons about pieces (concat branches, selected writers,
write-back copies, output buffers) asks this module, for symbolic bounds (the symbolic
build) and literal ones (icon4py's static build) alike.

A box is a tuple of inclusive intervals `(lo, hi)`, one per dimension, sympy
expressions; `hi < lo` is an empty interval (a piece empty for the given constants).
`facts` are expressions known to be `>= 0` (`analysis.symbolic.prove_any`).

- `contains(outer, inner)`: every point of `inner` lies in `outer`.
- `disjoint(a, b)` / `prove_disjoint(pieces)`: no point lies in two pieces; an overlap
  that literal bounds show gets its own reason, naming the pieces and the common box.
- `prove_cover(read, pieces)`: every point of `read` lies in some piece. Literal bounds
  are decided exactly (the read cut at every piece bound, each cell in some piece); a
  gap is reported with the box it leaves. Symbolic bounds are proven by guillotine cuts:
  along one dimension some chain of the pieces' intervals covers the read's interval
  (the chain may depend on the symbols, `prove_any`), and within each link the pieces
  spanning that link cover the read in the remaining dimensions, recursively.
- `Cover.select_dims`: the dimensions a run-time test must look at to find the piece
  holding an index (those where some piece does not span the read); `box_test` writes
  that test. Given disjoint pieces, exactly one piece passes it at every read index.

Pure; never raises on the expressions gt4py writes (`Max`/`Min` included).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional, Sequence

import sympy

from gt4py_dace_xforms.analysis.symbolic import (
    prove_any,
    prove_nonnegative,
    prove_nonnegative_given,
    to_sympy,
)


Interval = tuple[sympy.Expr, sympy.Expr]
Box = tuple[Interval, ...]
#: What `contains` and `prove_cover` read as a box: callers pass lists of intervals too.
BoxLike = Sequence[Interval]

#: Chains tried per dimension and level of the guillotine proof: k distinct intervals
#: give sum k!/(k-n)! chains (4 -> 64, 5 -> 325); gt4py's pieces have at most a handful.
_MAX_CHAINS = 400
#: Cells of the exact literal check: (2 * pieces + 1) ** dims is far below this.
_MAX_CELLS = 200_000


def as_box(box) -> Box:
    """`box` (pairs of bounds in any form `to_sympy` takes) as a `Box` of expanded sympy
    expressions.

    Args:
        box: inclusive `(lo, hi)` pairs, one per dimension.

    Returns:
        the box.
    """
    return tuple((sympy.expand(to_sympy(lo)), sympy.expand(to_sympy(hi))) for lo, hi in box)


def from_subset(subset) -> Box:
    """The box of a DaCe subset (inclusive bounds, unit steps assumed by the caller).

    Args:
        subset: a DaCe subset (`Range` or `Indices`).

    Returns:
        the box.
    """
    return tuple(
        (sympy.expand(to_sympy(b)), sympy.expand(to_sympy(e))) for b, e, _ in subset.ndrange()
    )


def show(box: Box) -> str:
    """`box` as text: `[lo, hi] x [lo, hi]`.

    Args:
        box: the box.

    Returns:
        the text.
    """
    return " x ".join(f"[{lo}, {hi}]" for lo, hi in box)


def _le(a, b, facts=()) -> bool:
    """`a <= b` provably."""
    return bool(prove_nonnegative_given(sympy.expand(b - a), facts))


def is_literal(*boxes: Box) -> bool:
    """Whether every bound of every box is an integer literal.

    Args:
        boxes: the boxes.

    Returns:
        True where no bound names a symbol.
    """
    return all(x.is_Integer for box in boxes for iv in box for x in iv)


def empty(box: Box, facts=()) -> bool:
    """Some interval of `box` is provably empty.

    Args:
        box: the box.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        True where an interval is proven empty.
    """
    return any(_le(hi + 1, lo, facts) for lo, hi in box)


def contains(outer: BoxLike, inner: BoxLike, facts=()) -> bool:
    """Every point of `inner` lies in `outer` (an empty `inner` only where the bounds say
    so: as gt4py's regions, an interval is compared by its bounds).

    Args:
        outer: the containing box.
        inner: the contained box.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        True where proven.
    """
    return all(
        _le(olo, ilo, facts) and _le(ihi, ohi, facts)
        for (olo, ohi), (ilo, ihi) in zip(outer, inner)
    )


def disjoint(a: Box, b: Box, facts=()) -> bool:
    """No point lies in both: for every value of the symbols some dimension separates
    them, or one of them is empty (which dimension may depend on the symbols).

    Args:
        a: a box.
        b: another box of the same rank.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        True where proven.
    """
    alternatives = []
    for (alo, ahi), (blo, bhi) in zip(a, b):
        alternatives += [[blo - ahi - 1], [alo - bhi - 1], [alo - ahi - 1], [blo - bhi - 1]]
    if any(prove_nonnegative(x) for (x,) in alternatives):
        return True
    return prove_any(alternatives, facts)


def meet(a: Box, b: Box) -> Optional[Box]:
    """The intersection of two literal boxes, `None` if it is empty.

    Args:
        a: a literal box.
        b: another literal box.

    Returns:
        the intersection, or None.
    """
    out = tuple((max(alo, blo), min(ahi, bhi)) for (alo, ahi), (blo, bhi) in zip(a, b))
    return None if any(hi < lo for lo, hi in out) else out


def prove_disjoint(pieces: Sequence[Box], facts=(), what: str = "pieces") -> Optional[str]:
    """Why the pieces are not pairwise disjoint (an overlap shown by literal bounds, or
    one not excluded), or `None`.

    Args:
        pieces: the boxes.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).
        what: what the pieces are, for the reason's text.

    Returns:
        the reason they are not shown disjoint, or None where they are.
    """
    for (i, a), (j, b) in itertools.combinations(enumerate(pieces), 2):
        if disjoint(a, b, facts):
            continue
        common = meet(a, b) if is_literal(a, b) else None
        if common is not None:
            return f"{what} {i} and {j} overlap in {show(common)}"
        return f"{what} {i} and {j} cannot be proven disjoint"
    return None


@dataclasses.dataclass(frozen=True)
class Cover:
    """The result of `prove_cover`: `reason` is `None` when proven; `select_dims` are the
    dimensions whose test tells the pieces apart (empty when one piece holds the read)."""

    reason: Optional[str] = None
    select_dims: tuple[int, ...] = ()

    @property
    def proven(self) -> bool:
        """Whether the cover is proven (no reason against it)."""
        return self.reason is None


def prove_cover(read: BoxLike, pieces: Sequence[Box], facts=(), what: str = "pieces") -> Cover:
    """Every point of `read` lies in some piece (see the module docstring).

    Args:
        read: the box to cover.
        pieces: the covering boxes.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).
        what: what the pieces are, for the reason's text.

    Returns:
        the `Cover`: proven, or the reason and the part not shown covered.
    """
    read, pieces = as_box(read), [as_box(p) for p in pieces]
    select = tuple(
        d for d in range(len(read)) if not all(contains((p[d],), (read[d],), facts) for p in pieces)
    )
    if empty(read, facts):
        return Cover(None, select)
    if is_literal(read, *pieces):
        gap = _literal_gap(read, pieces)
        if gap is None:
            return Cover(None, select)
        return Cover(f"{what} leave {show(gap)} of {show(read)} uncovered")
    if _guillotine(
        read, tuple(range(len(pieces))), pieces, tuple(range(len(read))), tuple(facts), {}
    ):
        return Cover(None, select)
    return Cover(
        f"{what} cannot be proven to cover the read {show(read)} (split in dimensions {list(select)})"
    )


def _literal_gap(read: Box, pieces: Sequence[Box]) -> Optional[Box]:
    """A cell of `read` that no piece holds, cutting every dimension at the pieces'
    bounds; `None` if there is none. Exact for literal bounds."""
    live = [m for m in (meet(read, p) for p in pieces) if m is not None]
    cuts = []
    for d, (lo, hi) in enumerate(read):
        points = sorted({lo, hi + 1} | {x for m in live for x in (m[d][0], m[d][1] + 1)})
        cuts.append(list(itertools.pairwise(points)))
    if sum(1 for _ in itertools.islice(itertools.product(*cuts), _MAX_CELLS + 1)) > _MAX_CELLS:
        return read  # too many cells to check: report the whole read as not shown covered
    for cell in itertools.product(*cuts):
        box = tuple((a, b - 1) for a, b in cell)
        if not any(contains(m, box) for m in live):
            return box
    return None


def _guillotine(read: Box, ids: tuple, pieces, dims: tuple, facts: tuple, memo: dict) -> bool:
    """The pieces `ids` cover `read` in `dims` (symbolic bounds): one of them spans it, or
    along some dimension a chain of their intervals covers the read's interval and, per
    link, the pieces spanning the link cover the read in the other dimensions."""
    key = (ids, dims)
    if key in memo:
        return memo[key]
    memo[key] = False  # a cycle cannot prove anything
    result = False
    if any(all(contains((pieces[i][d],), (read[d],), facts) for d in dims) for i in ids):
        result = True
    elif dims:
        for d in dims:
            if all(contains((pieces[i][d],), (read[d],), facts) for i in ids):
                continue  # no piece is cut here: cutting here gains nothing
            if _chain_along(read, ids, pieces, dims, d, facts, memo):
                result = True
                break
    memo[key] = result
    return result


def _chain_along(read, ids, pieces, dims, d, facts, memo) -> bool:
    lo, hi = read[d]
    spans: list[Interval] = []
    for i in ids:
        if not any(
            sympy.expand(s[0] - pieces[i][d][0]) == 0 and sympy.expand(s[1] - pieces[i][d][1]) == 0
            for s in spans
        ):
            spans.append(pieces[i][d])
    rest = tuple(x for x in dims if x != d)

    def link_covered(span) -> bool:
        spanning = tuple(i for i in ids if contains((pieces[i][d],), (span,), facts))
        return bool(spanning) and _guillotine(read, spanning, pieces, rest, facts, memo)

    usable = [s for s in spans if link_covered(s)]
    chains = itertools.chain.from_iterable(
        itertools.permutations(usable, n) for n in range(1, len(usable) + 1)
    )
    alternatives = [
        [
            lo - chain[0][0],
            chain[-1][1] - hi,
            *(prev[1] + 1 - nxt[0] for prev, nxt in itertools.pairwise(chain)),
        ]
        for chain in itertools.islice(chains, _MAX_CHAINS)
    ]
    return bool(alternatives) and prove_any(alternatives, facts)


def box_test(box: Box, dims: Sequence[int], index: Sequence[str]) -> str:
    """A Python/C condition true where `index` (names per dimension) lies in `box` along
    `dims`; `"True"` without dimensions.

    Args:
        box: the box.
        dims: the dimensions to test.
        index: the index name per dimension.

    Returns:
        the condition's text.
    """
    from dace import symbolic as dace_sym

    parts = [
        f"({dace_sym.symstr(box[d][0])} <= {index[d]}) and ({index[d]} <= {dace_sym.symstr(box[d][1])})"
        for d in dims
    ]
    return " and ".join(parts) if parts else "True"


def bounding_box(pieces: Sequence[Box], facts=()) -> Optional[Box]:
    """The smallest box holding every piece, where in each dimension one piece's bounds
    are provably the extremes; `None` otherwise.

    Args:
        pieces: the boxes, of one rank.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).

    Returns:
        the bounding box, or None.
    """
    out = []
    for d in range(len(pieces[0])):
        los, his = [p[d][0] for p in pieces], [p[d][1] for p in pieces]
        lo = next((x for x in los if all(_le(x, y, facts) for y in los)), None)
        hi = next((x for x in his if all(_le(y, x, facts) for y in his)), None)
        if lo is None or hi is None:
            return None
        out.append((lo, hi))
    return tuple(out)


def prove_tiling(
    pieces: Sequence[Box], facts=(), what: str = "pieces"
) -> tuple[Optional[Box], Optional[str]]:
    """The box the pieces tile (disjoint, covering their bounding box), or why not.

    Args:
        pieces: the boxes.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).
        what: what the pieces are, for the reason's text.

    Returns:
        `(box, None)` where the pieces tile `box`, else `(None, reason)`.
    """
    pieces = [as_box(p) for p in pieces]
    whole = bounding_box(pieces, facts)
    if whole is None:
        return None, f"{what} have no provable bounding box"
    reason = prove_disjoint(pieces, facts, what) or prove_cover(whole, pieces, facts, what).reason
    return (None, reason) if reason else (whole, None)
