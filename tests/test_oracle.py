"""The oracle (measure/oracle.py, bench/oracle.py): the policy that pins a decision set,
the greedy search on made-up timings, and one small program run end to end."""

import copy

import gt4py.next as gtx
import numpy as np
import pytest
from builders import producer_consumer, transient_arrays

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.measure import oracle
from gt4py_dace_xforms.policy import InlineOnly


def _pair():
    return producer_consumer("only", producer_ranges={"i": "0:N", "k": "0:K"},
                             consumer_ranges={"i": "0:N", "k": "0:K-1"}, write="i, k", reads=["i, k", "i, k + 1"])  # fmt: skip


def test_inline_only_takes_the_named_intermediate_and_nothing_else():
    named = _pair()
    report = gx.gt_inline_intermediates(named, policy=InlineOnly(("tmp",)))
    assert [r.intermediate for r in report.applied] == ["tmp"]
    assert "tmp" not in transient_arrays(named)

    other = _pair()
    before = copy.deepcopy(other)
    report = gx.gt_inline_intermediates(other, policy=InlineOnly(("gtir_tmp_1",)))
    assert (
        not report.applied
        and report.declined[0].reason == "tmp is not among the intermediates to inline"
    )
    assert other.hash_sdfg() == before.hash_sdfg()


def test_inline_only_round_trips_and_keeps_the_copy_bound():
    policy = InlineOnly(("tmp",), max_distinct_offsets=1)
    report = gx.gt_inline_intermediates(_pair(), policy=policy)
    assert (
        not report.applied
        and "exceed the bound max_distinct_offsets=1" in report.declined[0].reason
    )
    assert InlineOnly(**{k: v for k, v in vars(policy).items()}) == policy


def _fake_measure(table, calls):
    """A measurement that returns fixed ratios per set (sets not in `table`: 1.0)."""

    def measure(sets):
        calls.append(list(sets))
        return {s: table.get(s, 1.0) for s in sets}

    return measure


def test_greedy_adds_the_best_single_while_it_helps():
    f = frozenset
    singles = {"a": 0.90, "b": 0.95, "c": 0.97, "d": 1.10}
    table = {f("a"): 0.90, f("ab"): 0.85, f("ac"): 0.88, f("abc"): 0.86}
    calls = []
    kept, steps = oracle.greedy_search(singles, _fake_measure(table, calls))
    assert kept == f("ab")
    assert [s.accepted for s in steps] == [f("ab"), None]
    # d did not help alone, so it is never tried; each step measures the kept set too
    assert calls == [[f("a"), f("ab"), f("ac")], [f("ab"), f("abc")]]
    assert steps[1].kept_ratio == 0.85 and steps[1].tried == ((f("abc"), 0.86),)


def test_greedy_returns_stock_when_no_single_helps_and_respects_max_steps():
    calls = []
    kept, steps = oracle.greedy_search({"a": 1.0, "b": 1.3}, _fake_measure({}, calls))
    assert kept == frozenset() and steps == [] and calls == []

    table = {frozenset("a"): 0.9, frozenset("ab"): 0.8, frozenset("abc"): 0.7}
    kept, steps = oracle.greedy_search(
        {"a": 0.9, "b": 0.95, "c": 0.99}, _fake_measure(table, []), max_steps=1
    )
    assert kept == frozenset("ab") and len(steps) == 1


@pytest.mark.compile
def test_oracle_on_the_seed_program_builds_each_decision_set_once(tmp_path):
    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.cli import demo
    from gt4py_dace_xforms.integration import capture

    program = demo.vertical_difference_computed_program
    rng = np.random.default_rng(0)
    n, nlev = 64, 10
    args = {
        k: gtx.as_field([demo.Cell, demo.K], rng.random((n, nlev))) for k in ("interior", "surface")
    }
    args["out"] = gtx.zeros({demo.Cell: n, demo.K: nlev}, dtype=gtx.float64)
    args["nlev"] = np.int32(nlev)
    step = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    sdfg = capture.capture_stages(program, [step], offset_provider={})[step]
    lines = []
    result = oracle.run_oracle(program, args, {}, sdfg, name="seed", threads=(1,), rounds=2, search_rounds=2,
                               log=lines.append)  # fmt: skip

    # the model and everything sound both inline the one concat node: one build for both and its single
    sound = set(result.predicted["sound"])
    assert len(sound) == 1 and result.predicted["model"] == sorted(sound)
    # `none` (the library inlining nothing) is built apart from stock: its other passes run
    assert [v.labels for v in result.variants][:4] == [
        ["stock"],
        ["A/A"],
        ["none"],
        ["model", "sound", f"only:{sound.pop()}"],
    ]
    assert result.variants[2].applied == frozenset()
    model = result.variants[3]
    assert (
        model.applied == frozenset(result.predicted["model"])
        and model.applied_reads == 1
        and not model.mismatch
    )
    assert model.transients < result.variants[0].transients
    (r,) = result.results
    assert (
        r.threads == 1
        and set(r.ratio) >= {"A/A", "model", "sound"}
        and r.best in r.median_ms
        and r.best != "A/A"
    )
    assert r.regret.n == 2 and r.regret.median > 0
    text = result.table()
    assert "regret (model / best" in text and "same build as" in text
    assert result.to_json()["threads"][0]["regret_ok"] in (True, False)
