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


def prove_nonnegative(expr) -> Optional[bool]:
    """Decide `expr >= 0` for every value of the symbols in it.

    Returns `True` if proven, `False` if refuted (the expression is a negative
    constant), `None` if sympy cannot decide. Callers treat `None` as "not proven".
    """
    e = sympy.simplify(sympy.expand(to_sympy(expr)))
    if e.is_number:
        return bool(e >= 0)
    return True if e.is_nonnegative else None


def prove_nonnegative_given(expr, facts: Iterable = ()) -> Optional[bool]:
    """Like `prove_nonnegative`, also using `facts`, expressions known to be >= 0.

    `expr >= 0` follows if `expr - f >= 0` for one known-nonnegative `f`. Used with the
    consumer Map's `last - first` per dimension: a read only happens if the Map runs.
    """
    direct = prove_nonnegative(expr)
    if direct is not None:
        return direct
    e = to_sympy(expr)
    for fact in facts:
        if prove_nonnegative(e - to_sympy(fact)):
            return True
    return None


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
