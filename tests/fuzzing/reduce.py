"""Reduce a failing generated program to a minimal one, on the expression tree.

Hypothesis' own shrinking works on the sequence of random choices: most of its steps
decode to a different program that no longer fails, and each step here compiles (seconds).
On the first measured failure it made no useful progress in 25 minutes. This reducer
tries tree edits instead, each of which yields a valid, smaller program (a node replaced
by a child or a leaf, an output or a local dropped, a condition or a shift simplified, a
runtime bound made constant, ...), and keeps the first that still fails the same way,
until no edit does or the time is up.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterator, Optional

from fuzzing.strategy import (
    NC,
    Bin,
    Both,
    Cond,
    Expr,
    Lit,
    Pick,
    Prog,
    Read,
    Scan,
    Where,
    longest_run,
    prune,
    valid_levels,
)


SCALAR, CELL, FIELD = 0, 1, 2


def kind(prog: Prog, e: Expr) -> int:
    """Dimensions of `e`: scalar, Cell, or Cell x K (a valid concat_where is Cell x K: a
    condition on K needs a branch that carries Cell, one on Cell alone a Cell x K branch,
    see `valid`)."""
    if isinstance(e, Lit):
        return SCALAR
    if isinstance(e, Read):
        return CELL if e.name in prog.cells else SCALAR if e.name in prog.scalars else FIELD
    if isinstance(e, Bin):
        return max(kind(prog, e.lhs), kind(prog, e.rhs))
    return FIELD  # a concat_where, a Pick of two locals' values, a Scan


def valid(prog: Prog) -> bool:
    def ok(e: Expr) -> bool:
        if isinstance(e, Bin):
            return ok(e.lhs) and ok(e.rhs)
        if isinstance(e, Pick):
            return (
                kind(prog, e.lhs) == FIELD
                and kind(prog, e.rhs) == FIELD
                and ok(e.lhs)
                and ok(e.rhs)
            )
        if isinstance(e, Scan):
            return all(kind(prog, a) == FIELD and ok(a) for a in (e.arg, e.arg2) if a is not None)
        if isinstance(e, Where):
            if any(isinstance(b, Read) and b.name in prog.cells for b in (e.lhs, e.rhs)):
                return False  # as the strategy: a bare 1-D branch fails in gt4py itself
            # A condition on Cell alone adds no K: one branch must be Cell x K.
            need = FIELD if _cond_dims(e.cond) == {"Cell"} else CELL
            return max(kind(prog, e.lhs), kind(prog, e.rhs)) >= need and ok(e.lhs) and ok(e.rhs)
        if isinstance(e, Read) and e.shift and kind(prog, e) != FIELD:
            return False
        return True

    exprs = [e for _, e in prog.locals] + list(prog.outputs)
    return all(kind(prog, e) == FIELD and ok(e) for e in exprs)


def _cond_dims(c) -> set[str]:
    return _cond_dims(c.lhs) | _cond_dims(c.rhs) if isinstance(c, Both) else {c.dim}


def _subtrees(e: Expr, path=()) -> Iterator[tuple[tuple, Expr]]:
    yield path, e
    if isinstance(e, Scan):
        yield from _subtrees(e.arg, (*path, "arg"))
        if e.arg2 is not None:
            yield from _subtrees(e.arg2, (*path, "arg2"))
    if isinstance(e, (Bin, Where, Pick)):
        yield from _subtrees(e.lhs, (*path, "lhs"))
        yield from _subtrees(e.rhs, (*path, "rhs"))


def _replace(e: Expr, path: tuple, new) -> Expr:
    if not path:
        return new
    return dataclasses.replace(e, **{path[0]: _replace(getattr(e, path[0]), path[1:], new)})


def _simpler_conds(c) -> Iterator:
    if isinstance(c, Both):
        yield c.lhs
        yield c.rhs
        return
    if c.runtime is not None:
        return
    if c.op != "<":
        yield dataclasses.replace(c, op="<")


def _edits(prog: Prog, data_seed: int) -> Iterator[tuple[Prog, int]]:
    """Candidate reductions, larger ones first."""
    if prog.overwrite:
        yield dataclasses.replace(prog, overwrite=False), data_seed
    if len(prog.outputs) > 1:
        for i, o in enumerate(prog.outputs):
            yield (
                dataclasses.replace(prog, outputs=(o,), out_cells=prog.out_cells[i : i + 1]),
                data_seed,
            )
    # Replace a local by an input: every read of it becomes a read of the first field.
    for name, _ in prog.locals:

        def swap(e, name=name):
            if isinstance(e, Read) and e.name == name:
                return Read(prog.fields[0], e.shift, e.nbr)
            if isinstance(e, (Bin, Where, Pick)):
                return dataclasses.replace(e, lhs=swap(e.lhs), rhs=swap(e.rhs))
            if isinstance(e, Scan):
                return dataclasses.replace(
                    e, arg=swap(e.arg), arg2=None if e.arg2 is None else swap(e.arg2)
                )
            return e

        yield (
            dataclasses.replace(
                prog,
                locals=tuple((n, swap(e)) for n, e in prog.locals),
                outputs=tuple(swap(e) for e in prog.outputs),
            ),
            data_seed,
        )
    slots = [("locals", i) for i in range(len(prog.locals))] + [
        ("outputs", i) for i in range(len(prog.outputs))
    ]

    def put(slot, expr) -> Prog:
        where, i = slot
        if where == "locals":
            name = prog.locals[i][0]
            return dataclasses.replace(
                prog, locals=(*prog.locals[:i], (name, expr), *prog.locals[i + 1 :])
            )
        return dataclasses.replace(prog, outputs=(*prog.outputs[:i], expr, *prog.outputs[i + 1 :]))

    def root(slot) -> Expr:
        return prog.locals[slot[1]][1] if slot[0] == "locals" else prog.outputs[slot[1]]

    # A node replaced by one of its children, then by a leaf.
    for slot in slots:
        for path, node in _subtrees(root(slot)):
            if isinstance(node, Scan):
                if node.arg2 is not None:
                    yield (
                        put(slot, _replace(root(slot), path, dataclasses.replace(node, arg2=None))),
                        data_seed,
                    )
                yield put(slot, _replace(root(slot), path, node.arg)), data_seed
            if isinstance(node, (Bin, Where, Pick)):
                for child in (node.lhs, node.rhs):
                    yield put(slot, _replace(root(slot), path, child)), data_seed
    local_names = {n for n, _ in prog.locals}
    for slot in slots:
        for path, node in _subtrees(root(slot)):
            if not isinstance(node, (Read, Lit)) or (
                isinstance(node, Read) and node.name in local_names
            ):
                for leaf in (Read(prog.fields[0]), Lit(2.0)):
                    yield put(slot, _replace(root(slot), path, leaf)), data_seed
    # Conditions: a runtime bound becomes its value, a pair one of its halves, an
    # operator `<`; shifts move towards +1, then 0; a backward scan becomes a forward one.
    for slot in slots:
        for path, node in _subtrees(root(slot)):
            if isinstance(node, Scan) and not node.forward:
                yield (
                    put(slot, _replace(root(slot), path, dataclasses.replace(node, forward=True))),
                    data_seed,
                )
            if isinstance(node, Where):
                for c in _simpler_conds(node.cond):
                    yield (
                        put(slot, _replace(root(slot), path, dataclasses.replace(node, cond=c))),
                        data_seed,
                    )
                if isinstance(node.cond, Cond) and node.cond.runtime is not None:
                    levels = dict(prog.levels) | dict(
                        prog.zones
                    )  # a Cell condition reads a zone bound
                    const = Cond(
                        node.cond.op, node.cond.bound + levels[node.cond.runtime], dim=node.cond.dim
                    )
                    yield (
                        put(
                            slot, _replace(root(slot), path, dataclasses.replace(node, cond=const))
                        ),
                        data_seed,
                    )
            if isinstance(node, Read) and node.shift not in (0, 1):
                for d in (1, 0):
                    yield (
                        put(slot, _replace(root(slot), path, Read(node.name, d, node.nbr))),
                        data_seed,
                    )
            if isinstance(node, Read) and node.shift == 1:
                yield put(slot, _replace(root(slot), path, Read(node.name, 0, node.nbr))), data_seed
            if isinstance(node, Read) and node.nbr is not None:
                yield put(slot, _replace(root(slot), path, Read(node.name, node.shift))), data_seed
    if prog.dtype != "float64":
        yield dataclasses.replace(prog, dtype="float64"), data_seed
    if prog.runtime_k_domain:
        yield dataclasses.replace(prog, runtime_k_domain=False), data_seed
    if len(set(prog.out_cells)) > 1:  # every output on out0's zones
        yield (
            dataclasses.replace(prog, out_cells=(prog.out_cells[0],) * len(prog.out_cells)),
            data_seed,
        )
    if prog.zones and not prog.cond_zones():  # the layout only in the domains: one literal range
        cells = prog.out_domains()[0][0]
        if cells[1] - cells[0] >= 2:
            yield dataclasses.replace(prog, zones=(), out_cells=(), cell_domain=cells), data_seed
    if prog.cell_domain != (0, NC) and not prog.zones:
        yield dataclasses.replace(prog, cell_domain=(0, NC)), data_seed
    if data_seed != 0:
        yield prog, 0


def _normalise(prog: Prog) -> Optional[Prog]:
    """Prune, and fit the K domain into the levels where the program is defined (None if
    the candidate is not a valid program)."""
    prog = prune(prog)
    if not valid(prog):
        return None
    ok = valid_levels(prog)
    k0, k1 = prog.k_domain
    if not ok[k0:k1].all():
        lo, hi = longest_run(ok)
        k0, k1 = max(k0, lo), min(k1, hi)
        if k1 - k0 < 2:  # as the strategy: gt4py fails on one-level ranges
            return None
        prog = dataclasses.replace(prog, k_domain=(k0, k1))
    return prog


def reduce(
    prog: Prog,
    data_seed: int,
    fails: Callable[[Prog, int], bool],
    seconds: float,
    log: Optional[Callable[[str], None]] = None,
) -> tuple[Prog, int]:
    """The smallest program reachable by edits from `prog` for which `fails` holds."""
    deadline = time.perf_counter() + seconds
    tried: set = set()
    progress = True
    while progress and time.perf_counter() < deadline:
        progress = False
        for cand, seed in _edits(prog, data_seed):
            cand = _normalise(cand)
            if (
                cand is None
                or (cand.source(), seed) in tried
                or (cand == prog and seed == data_seed)
            ):
                continue
            tried.add((cand.source(), seed))
            if time.perf_counter() >= deadline:
                break
            if fails(cand, seed):
                prog, data_seed, progress = cand, seed, True
                if log:
                    log(
                        f"  reduced to {cand.n_ops()} operations, {len(cand.locals)} locals (prog_{cand.key()})"
                    )
                break
    return prog, data_seed
