"""The fuzzer's strategy and reducer without compiling: what the CI draws of
tests/test_fuzz_programs.py reach, and how the reducer shrinks a draw with a run-time
bound (issue 60)."""

import dataclasses
import re

import fuzzing.runner as runner
import numpy as np
from fuzzing import CI_PROGRAMS
from fuzzing.reduce import reduce, valid
from fuzzing.strategy import (
    NC,
    NL,
    Bin,
    Cond,
    Lit,
    Prog,
    Read,
    Scan,
    Where,
    evaluate_numpy,
    programs,
)
from hypothesis import settings


def _ci_draws(monkeypatch) -> list[Prog]:
    """The programs the CI property draws (profile "fuzz-ci", derandomized: the same draws as
    the compiling test, whose property is this same function), not compiled."""
    drawn = []
    monkeypatch.setattr(runner, "check_program", lambda prog, data_seed, stats: drawn.append(prog))
    runner.run_property(
        settings.get_profile("fuzz-ci"),
        runner.Stats(),
        reduce_seconds=0,
        strategy=programs(**CI_PROGRAMS),
    )
    return drawn


def test_ci_draws_reach_run_time_bounds(monkeypatch):
    """Some CI draws have a concat_where on a run-time bound (`nc` or `nk`, an int32 argument
    of the field operator) whose result the first output reads; each of them is a valid
    program on which numpy is defined on the whole output domain."""
    drawn = _ci_draws(monkeypatch)
    bounded = [p for p in drawn if p.run_time_bounds()]
    assert bounded, [p.source() for p in drawn]
    for prog in bounded:
        bound = prog.run_time_bounds().split("=")[0]
        assert f"{bound}: int32" in prog.source().split("def fop(")[1].split(")")[0]
        assert re.search(rf"concat_where\((Cell|K) (<|>=|<=|>) {bound}, ", prog.source()), (
            prog.source()
        )
        assert valid(prog)
        (c0, c1), (k0, k1) = prog.out_domains()[0]
        ref = evaluate_numpy(prog, prog.call_args(0))[0]
        assert np.isfinite(ref[c0:c1, k0:k1]).all()


def test_reducer_shrinks_a_run_time_bound_draw():
    """A failure that needs a neighbor read of a local split at the run-time bound `nc` (as
    issue 60's): the reducer drops the rest (the second output, the scan, the other local,
    computed branches) and keeps the bound, every candidate a valid program."""
    split = Where(
        Cond(">=", 0, "nc", dim="Cell"),
        Bin("*", Read("a"), Lit(2.0)),
        Bin("+", Bin("*", Read("b"), Lit(3.0)), Read("t0", 1)),
    )
    prog = Prog(
        dtype="float32",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(("nc", 3),),
        locals=(("t0", Bin("-", Read("a", -1), Read("b"))), ("t1", split)),
        outputs=(
            Bin("-", Scan(Read("t1", 0, 2)), Read("t1", -1)),
            Bin("+", Read("t0"), Read("b", 0, 1)),
        ),
        cell_domain=(1, NC),
        k_domain=(1, NL - 1),
        runtime_k_domain=True,
    )
    tried = []

    def fails(candidate: Prog, data_seed: int) -> bool:
        assert valid(candidate), candidate.source()
        tried.append(candidate)
        src = candidate.source()
        return "concat_where(Cell >= nc" in src and "(C2C[" in src

    small, _ = reduce(prog, 5, fails, seconds=60)
    body = small.source().split("def fop(")[1].split("@gtx.program")[0]
    assert "concat_where(Cell >= nc, " in body and "(C2C[" in body, body
    assert small.levels == (("nc", 3),) and len(small.outputs) == 1 and not small.uses_scan(), body
    assert small.n_ops() <= 3 and small.dtype == "float64" and not small.runtime_k_domain, body
    assert len(tried) > 5


def test_reducer_turns_a_backward_scan_forward_and_a_bound_constant():
    """The edits the run-time-bound draws add: a backward scan becomes a forward one, and the
    bound its value (`Cell < nc` with nc = 3 becomes `Cell < 3`)."""
    x = Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b"))
    split = Where(
        Cond("<", 0, "nc", dim="Cell"),
        Scan(Read("t0", 1), Read("t0")),
        Scan(Read("t0", 1), Read("t0"), forward=False),
    )
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(("nc", 3),),
        locals=(("t0", x),),
        outputs=(split,),
        cell_domain=(0, NC),
        k_domain=(0, NL - 1),
        runtime_k_domain=False,
    )
    assert "decay2_down(t0(K + 1), t0)" in prog.source() and "def decay2_down(" in prog.source()
    seen = []

    def fails(candidate: Prog, data_seed: int) -> bool:
        seen.append(candidate.source())
        return "concat_where(Cell < " in candidate.source() and candidate.uses_scan()

    small, _ = reduce(prog, 0, fails, seconds=60)
    assert any("concat_where(Cell < 3, " in s for s in seen) and any(
        "decay2_down" not in s and "decay2(" in s for s in seen
    )
    assert "concat_where(Cell < 3, " in small.source() and "_down" not in small.source(), (
        small.source()
    )
    assert dataclasses.replace(small, levels=()) == small  # the bound went with its last use
