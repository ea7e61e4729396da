"""Small, pure helpers on symbolic index expressions (sympy, as DaCe stores them)."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Optional

import sympy
from dace import symbolic as dace_sym


def to_sympy(expr) -> sympy.Expr:
    """Return `expr` (a DaCe symbolic value, int or string) as a sympy expression."""
    if isinstance(expr, sympy.Basic):
        return expr
    return dace_sym.pystr_to_symbolic(str(expr))


def free_names(expr) -> set[str]:
    """Names of the free symbols of `expr`."""
    return {str(s) for s in to_sympy(expr).free_symbols}


def prove_nonnegative(expr, _depth: int = 0) -> Optional[bool]:
    """Decide `expr >= 0` for every value of the symbols in it.

    Returns `True` if proven, `False` if refuted (the expression is a negative
    constant), `None` if undecided. Callers treat `None` as "not proven".

    Besides sympy's own reasoning, `Max`/`Min` terms (gt4py writes domain bounds as
    `Max(end_cell_halo, end_cell_local)` and the like) are split: with `e = M + R`,
    `M = Max(x_1, ...)` gives `e >= 0` if `x_i + R >= 0` for one `i`, `-Max` needs it
    for every `i`, and dually for `Min`.
    """
    e = sympy.expand(to_sympy(expr))
    if e.is_number:
        return bool(e >= 0)
    if e.is_nonnegative:
        return True
    e = sympy.simplify(e)
    if e.is_number:
        return bool(e >= 0)
    if e.is_nonnegative:
        return True
    if _depth >= _MAX_DEPTH:
        return None
    for term in sympy.Add.make_args(e):
        coeff, core = term.as_coeff_Mul()
        if not isinstance(core, (sympy.Max, sympy.Min)) or coeff not in (1, -1):
            continue
        rest = e - term
        args = [coeff * a + rest for a in core.args]
        need_all = (coeff == 1) == isinstance(core, sympy.Min)
        results = [prove_nonnegative(a, _depth + 1) for a in args]
        if need_all and all(r is True for r in results):
            return True
        if not need_all and any(r is True for r in results):
            return True
    return None


_MAX_DEPTH = 6


def prove_nonnegative_given(expr, facts: Iterable = ()) -> Optional[bool]:
    """Like `prove_nonnegative`, also using `facts`, expressions known to be >= 0.

    Two uses of a fact `f >= 0`: `expr >= 0` follows if `expr - f >= 0`; and a fact
    `x + c >= 0` in one symbol `x` lets `x` be replaced by `s - c` with a fresh
    nonnegative `s`, which lets sympy decide `Min(1, x)` once `x >= 2` is known. Used
    with the consumer Map's `last - first` per dimension: a read only happens if the
    Map runs.
    """
    direct = prove_nonnegative(expr)
    if direct is not None:
        return direct
    e = to_sympy(expr)
    facts = [sympy.expand(to_sympy(f)) for f in facts]
    for fact in facts:
        if prove_nonnegative(e - fact):
            return True
    subs = _substitutions(facts)
    if subs and prove_nonnegative(e.subs(subs)):
        return True
    return None


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
    """True if `expr` simplifies to the literal 0."""
    return sympy.simplify(sympy.expand(to_sympy(expr))) == 0


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
    """A stable string for an expression, used as a grouping key."""
    return str(sympy.simplify(sympy.expand(to_sympy(expr))))
