"""Small, pure helpers on symbolic index expressions (sympy, as DaCe stores them)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Iterable, Optional, Sequence

import sympy
from dace import symbolic as dace_sym


def to_sympy(expr) -> sympy.Expr:
    """Return `expr` (a DaCe symbolic value, int or string) as a sympy expression.

    Args:
        expr: the value.

    Returns:
        the sympy expression.
    """
    if isinstance(expr, sympy.Basic):
        return expr
    return dace_sym.pystr_to_symbolic(str(expr))


def free_names(expr) -> set[str]:
    """Names of the free symbols of `expr`.

    Args:
        expr: anything `to_sympy` takes.

    Returns:
        the names.
    """
    return {str(s) for s in to_sympy(expr).free_symbols}


def prove_nonnegative(expr, _depth: int = 0) -> Optional[bool]:
    """Decide `expr >= 0` for every value of the symbols in it (cached; see `_prove_nonnegative`
    for how).

    Args:
        expr: anything `to_sympy` takes.
        _depth: the recursion depth of the `Max`/`Min` splits (callers leave it at 0).

    Returns:
        True if proven, False if refuted (a negative constant), None if undecided.
    """
    return _prove_nonnegative(sympy.expand(to_sympy(expr)), _depth)


@functools.lru_cache(maxsize=65536)
def _prove_nonnegative(expr: sympy.Expr, _depth: int) -> Optional[bool]:
    """Decide `expr >= 0` for every value of the symbols in it.

    Returns `True` if proven, `False` if refuted (the expression is a negative
    constant), `None` if undecided. Callers treat `None` as "not proven".

    Besides sympy's own reasoning, `Max`/`Min` terms (gt4py writes domain bounds as
    `Max(end_cell_halo, end_cell_local)` and the like) are split: with `e = M + R`,
    `M = Max(x_1, ...)` gives `e >= 0` if `x_i + R >= 0` for one `i`, `-Max` needs it
    for every `i`, and dually for `Min`.
    """
    e = expr
    if e.is_number:
        # A number may still hold an unevaluated `Min(3, 10)` (gt4py writes some bounds
        # so), whose comparison sympy cannot turn into a bool: evaluate it first.
        value = e.doit()
        if not value.is_comparable:
            return None
        return bool(value >= 0)
    if e.is_nonnegative:
        return True
    if _depth >= _MAX_DEPTH:
        return None
    for term in sympy.Add.make_args(e):
        coeff, core = term.as_coeff_Mul()
        if not isinstance(core, (sympy.Max, sympy.Min)) or coeff not in (1, -1):
            continue
        rest = e - term
        cases = (sympy.expand(coeff * a + rest) for a in core.args)
        # Lazily: each case recurses up to _MAX_DEPTH through sympy's assumptions, and
        # the first one that decides is enough (4x less time in the target's pass).
        if (coeff == 1) == isinstance(core, sympy.Min):
            if all(_prove_nonnegative(c, _depth + 1) is True for c in cases):
                return True
        elif any(_prove_nonnegative(c, _depth + 1) is True for c in cases):
            return True
    return None


_MAX_DEPTH = 6


def prove_nonnegative_given(expr, facts: Iterable = ()) -> Optional[bool]:
    """Like `prove_nonnegative`, also using `facts`, expressions known to be >= 0.

    See `prove_any`; returns `True` or `None` (undecided).

    Args:
        expr: anything `to_sympy` takes.
        facts: expressions known to be >= 0.

    Returns:
        True if proven, None if undecided.
    """
    direct = prove_nonnegative(expr)
    if direct is not None:
        return direct
    return True if prove_any([[expr]], facts) else None


def prove_any(alternatives: Sequence[Sequence], facts: Iterable = ()) -> bool:
    """Prove that, for every value of the symbols, some alternative has all its
    expressions `>= 0`, given `facts` (expressions known to be `>= 0`).

    Facts come from "this Map runs" / "this copy is not empty" (`last - first >= 0`).
    Used three ways:

    - `x >= 0` follows if `x - f >= 0` for one fact `f`;
    - a fact `y + c >= 0` in one symbol `y` lets `y` be replaced by `s - c` with a fresh
      nonnegative `s` (sympy then decides `Min(1, y)` once `y >= 2` is known);
    - case split on a `Max`/`Min` term: for each argument that can be the extreme one,
      substitute it, add that as a fact, and prove in every case whose facts are not
      contradictory (a fact provably `<= -1`). This turns `Max(0, n) - 1 >= 0` into
      `Max(0, n) == n`, and lets different alternatives hold in different cases (a
      region that is empty for some symbol values).

    The search has a budget; running out means "not proven".

    Args:
        alternatives: lists of expressions, each list one alternative.
        facts: expressions known to be >= 0.

    Returns:
        True where proven.
    """
    alts = tuple(tuple(sympy.expand(to_sympy(x)) for x in alt) for alt in alternatives)
    fs = tuple(sympy.expand(to_sympy(f)) for f in facts)
    return _prove_any(alts, fs)


# The pass re-analyses every candidate each round and prices groups by analysing every
# sibling, so the same query comes back many times (the target: 266 queries, 48
# distinct); a failed one costs the whole case-split budget each time. The result depends
# on the expressions alone (the budget starts afresh), so it is kept.
@functools.lru_cache(maxsize=4096)
def _prove_any(alts: tuple, facts: tuple) -> bool:
    return _any(list(alts), facts, 0, [_CASE_BUDGET])


def _holds(x, facts, subs) -> bool:
    if prove_nonnegative(x):
        return True
    if any(prove_nonnegative(x - f) for f in facts):
        return True
    return bool(subs) and bool(prove_nonnegative(x.subs(subs)))


def _any(alts, facts, depth, budget) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    subs = _substitutions(facts)
    for alt in alts:
        if all(_holds(x, facts, subs) for x in alt):
            return True
    if depth >= _MAX_CASE_DEPTH:
        return False
    # Split the outermost extreme of the goals first (that is the one they compare),
    # then those of the facts.
    pool = set().union(*(x.atoms(sympy.Max, sympy.Min) for alt in alts for x in alt))
    pool = pool or set().union(*(f.atoms(sympy.Max, sympy.Min) for f in facts))
    if not pool:
        return False
    atom = max(pool, key=lambda a: (sympy.count_ops(a), str(a)))
    for i, arg in enumerate(atom.args):
        others = [a for j, a in enumerate(atom.args) if j != i]
        case = [(arg - o) if isinstance(atom, sympy.Max) else (o - arg) for o in others]
        case_facts = tuple(sympy.expand(f.subs(atom, arg)) for f in facts) + tuple(
            sympy.expand(c) for c in case
        )
        if any(prove_nonnegative(-f - 1) for f in case_facts):
            continue  # this case cannot happen
        case_alts = [tuple(sympy.expand(x.subs(atom, arg)) for x in alt) for alt in alts]
        if not _any(case_alts, case_facts, depth + 1, budget):
            return False
    return True


# gt4py's split concat bounds nest three or four extremes deep (e.g. a region ending at
# `Max(1, vs, Min(ve, Max(2, d - 2)))` against a read up to `ve - Max(1, vs) - 1`): the
# icon4py census needs depth 6 and a few hundred steps for its 7 such proofs (4/80 proved
# none of them); a query that fails costs at most the budget.
_MAX_CASE_DEPTH = 6
_CASE_BUDGET = 400  # recursive steps per query; undecided beyond that (decline)


def _substitutions(facts) -> dict:
    """`x -> s - c` for every fact `x + c >= 0` (one symbol, coefficient 1)."""
    subs: dict = {}
    for n, fact in enumerate(facts):
        syms = list(fact.free_symbols)
        if len(syms) != 1 or syms[0] in subs:
            continue
        x = syms[0]
        poly = sympy.Poly(fact, x) if fact.is_polynomial(x) else None
        if poly is None or poly.degree() != 1 or poly.coeff_monomial(x) != 1:
            continue
        fresh = sympy.Symbol(f"__nonneg_{n}", integer=True, nonnegative=True)
        subs[x] = fresh - poly.coeff_monomial(1)
    return subs


def prove_zero(expr) -> bool:
    """True if `expr` simplifies to the literal 0.

    Args:
        expr: anything `to_sympy` takes.

    Returns:
        True where it is 0.
    """
    return _prove_zero(sympy.expand(to_sympy(expr)))


@functools.lru_cache(maxsize=65536)
def _prove_zero(e: sympy.Expr) -> bool:
    if e == 0:
        return True
    if not e.atoms(sympy.Function):
        return False  # an expanded polynomial that is not 0 is not identically 0
    return sympy.simplify(e) == 0  # Max/Min/floor may cancel only after simplification


@dataclasses.dataclass(frozen=True)
class IndexTerm:
    """One index component written as `param + offset`.

    `param` is `None` for an index that depends on no parameter of the map under
    consideration (a constant or symbol-only index); then `offset` is the whole
    index.
    """

    param: Optional[str]
    offset: sympy.Expr

    def expr(self) -> sympy.Expr:
        """The index as one expression: `param + offset` (the offset alone without a parameter).

        Returns:
            the sympy expression.
        """
        if self.param is None:
            return self.offset
        return self.offset + dace_sym.symbol(self.param)


class UnsupportedIndex(ValueError):
    """An index expression that is not of the form `param + c`."""


def split_index(expr, params: Iterable[str]) -> IndexTerm:
    """Write `expr` as `p + c` with `p` one of `params` and `c` free of all of them.

    The parameter is found by intersecting the free symbols of `expr` with
    `params`, so any number of other symbols (range starts, `Min(...)` of model
    levels, ...) may occur in `c`.

    Raises:
        UnsupportedIndex: if two parameters occur, or the parameter does not occur with
            coefficient one.

    Args:
        expr: the index expression.
        params: the Map's parameters.

    Returns:
        the `IndexTerm` (parameter None: a constant index).
    """
    e = sympy.expand(to_sympy(expr))
    params = set(params)
    used = sorted(free_names(e) & params)
    if not used:
        return IndexTerm(None, e)
    if len(used) > 1:
        raise UnsupportedIndex(f"index '{e}' mixes map parameters {used}")
    p = dace_sym.symbol(used[0])
    offset = sympy.expand(e - p)
    if p in offset.free_symbols:
        raise UnsupportedIndex(f"index '{e}' is not '{p} + c' (parameter not with coefficient 1)")
    return IndexTerm(used[0], offset)


def canonical(expr) -> str:
    """A stable string for an expression, used as a grouping key.

    Expanded, not simplified: `simplify` dominated the pass's run time (about two thirds
    on icon4py programs), and two spellings of one offset that `expand` leaves apart only
    cost an extra copy, never a wrong rewrite.

    Args:
        expr: anything `to_sympy` takes.

    Returns:
        the key.
    """
    return _canonical(to_sympy(expr))


@functools.lru_cache(maxsize=65536)
def _canonical(expr: sympy.Expr) -> str:
    return str(sympy.expand(expr))
