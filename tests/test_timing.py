"""The bench's and the demo's measurement (measure/timing.py), without compiling
except where marked: round order, the fields every build of a round shares, the
median's interval, the A/A floor and the verdict, new persistent transients per batch."""

import collections
import itertools

import gt4py.next as gtx
import numpy as np
import pytest

from gt4py_dace_xforms.measure import timing


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)


def test_every_build_once_per_round_rotating_on_the_rounds_shared_fields():
    a = gtx.as_field([Cell, K], np.ones((4, 3)))
    seen = []

    def call(label):
        def run(args):
            assert args["a"] is not a and np.array_equal(args["a"].asnumpy(), a.asnumpy())
            args["a"].ndarray[:] = (
                7.0  # an output written in place must not leak into the next call
            )
            seen.append((label, id(args["a"])))

        return run

    times = timing.time_rounds(
        {"x": call("x"), "y": call("y"), "z": call("z")}, {"a": a, "n": 3}, rounds=4
    )
    assert [label for label, _ in seen] == list("xyzzyxyzxyxz")
    assert {k: len(v) for k, v in times.items()} == {"x": 4, "y": 4, "z": 4}
    ids = [i for _, i in seen]
    rounds = [ids[3 * r : 3 * r + 3] for r in range(4)]
    assert all(len(set(r)) == 1 for r in rounds)  # the same field object for every build of a round
    assert (
        len({r[0] for r in rounds[:2]}) == 2
    )  # and a new one in the next round (the old one still alive)
    assert np.all(a.asnumpy() == 1.0)


def test_over_2n_rounds_every_build_takes_every_position_equally_often():
    for labels in ("xy", "sai", "wxyz"):
        orders = [timing.round_order(labels, r) for r in range(2 * len(labels))]
        positions = collections.Counter((i, x) for o in orders for i, x in enumerate(o))
        assert len(positions) == len(labels) ** 2 and set(positions.values()) == {2}


def test_two_or_three_builds_follow_every_other_equally_often():
    three = [tuple(timing.round_order("sai", r)) for r in range(6)]
    assert sorted(three) == sorted(itertools.permutations("sai"))  # all six orders
    for labels in ("xy", "sai"):
        n = len(labels)
        orders = [timing.round_order(labels, r) for r in range(2 * n)]
        follows = collections.Counter((a, b) for o in orders for a, b in itertools.pairwise(o))
        assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


def test_sync_brackets_every_timed_call():
    events = []
    timing.time_rounds(
        {"x": lambda a: events.append("call")}, {}, rounds=2, sync=lambda: events.append("sync")
    )
    assert events == ["sync", "call", "sync"] * 2


def test_median_interval_takes_the_order_statistics_with_95_percent_coverage():
    iv = timing.median_interval(
        [9, 1, 8, 2, 7, 3, 6, 4, 5]
    )  # n = 9: x_(2)..x_(8), coverage 1 - 2 * 10/512
    assert (iv.median, iv.lo, iv.hi, iv.n) == (5, 2, 8, 9)
    assert iv.coverage == pytest.approx(1 - 20 / 512)
    iv = timing.median_interval(range(1, 13))  # n = 12: x_(3)..x_(10)
    assert (iv.lo, iv.hi) == (3, 10) and iv.coverage == pytest.approx(1 - 2 * 79 / 4096)
    few = timing.median_interval([3.0, 1.0, 2.0])  # too few rounds for 95%: min..max, and says so
    assert (few.lo, few.hi) == (1.0, 3.0) and few.coverage == pytest.approx(0.75)
    with pytest.raises(ValueError):
        timing.median_interval([])


def test_one_outlying_round_does_not_reach_the_interval():
    base = [1.00, 0.99, 1.01, 1.02, 0.98, 1.00, 0.995, 1.005, 1.0]
    a, b = timing.median_interval(base), timing.median_interval([*base[:-1], 3.0])
    assert (a.lo, a.hi) == (0.99, 1.01) and (b.lo, b.hi) == (0.99, 1.02)  # not 3.0


def test_timing_ratio_is_the_median_of_per_round_ratios():
    t = timing.Timing("library", (0.9, 0.5, 0.8), (1.0, 1.0, 0.5))
    assert t.ratios == [0.9, 0.5, 1.6]
    assert t.ratio.median == 0.9 and (t.ratio.lo, t.ratio.hi) == (0.5, 1.6)
    assert t.median_ms == pytest.approx(800.0)


def _iv(median, lo, hi):
    return timing.Interval(median, lo, hi, 12, 0.96)


def test_noise_floor_is_how_far_the_a_a_interval_reaches_from_one():
    assert timing.noise_floor(_iv(1.0, 0.98, 1.03)) == pytest.approx(0.03)
    assert timing.noise_floor(_iv(1.05, 1.04, 1.06)) == pytest.approx(
        0.06
    )  # a biased A/A widens it


def test_noise_floor_is_never_narrower_than_the_minimum():
    # scan's pair after 204 rounds: one draw of two identical builds' memory, not a
    # precision a second run has (its 0.986 [0.981..0.992] flipped between runs)
    narrow = _iv(1.000, 0.994, 1.008)
    assert timing.noise_floor(narrow) == pytest.approx(timing.MIN_FLOOR) == pytest.approx(0.03)
    assert timing.noise_floor(narrow, minimum=0.0) == pytest.approx(0.008)
    assert timing.verdict(_iv(0.986, 0.981, 0.992), narrow).word == timing.NO_DIFFERENCE
    # the target's default mode in the span pair: "faster" against ±2.0 %, while its runs
    # ranged 0.959-1.006 and identical builds' medians go past 2 % in one run of six
    assert timing.verdict(_iv(0.970, 0.952, 0.979), narrow).word == timing.NO_DIFFERENCE
    assert timing.verdict(_iv(0.970, 0.952, 0.979), narrow).floor == pytest.approx(0.03)
    assert timing.verdict(_iv(0.875, 0.856, 0.893), narrow).word == timing.FASTER


def test_verdict_needs_the_whole_interval_beyond_the_floor():
    aa = _iv(1.0, 0.97, 1.02)  # floor 3%
    assert timing.verdict(_iv(0.90, 0.85, 0.96), aa).word == timing.FASTER
    assert timing.verdict(_iv(1.10, 1.04, 1.2), aa).word == timing.SLOWER
    # median outside the floor, interval reaching into it: not a result
    assert timing.verdict(_iv(0.95, 0.93, 0.975), aa).word == timing.NO_DIFFERENCE
    assert timing.verdict(_iv(1.05, 1.02, 1.08), aa).word == timing.NO_DIFFERENCE
    # median inside the floor: never a result, however narrow the interval
    assert timing.verdict(_iv(0.98, 0.98, 0.98), aa).word == timing.NO_DIFFERENCE
    assert timing.verdict(_iv(1.0, 0.5, 1.5), aa).word == timing.NO_DIFFERENCE


def test_undecided_when_the_interval_straddles_an_edge_of_the_floor():
    aa = _iv(1.0, 0.97, 1.02)  # floor 3%
    assert timing.undecided(_iv(0.95, 0.93, 0.975), aa)  # reaches across 0.97
    assert timing.undecided(_iv(1.05, 1.02, 1.08), aa)  # across 1.03
    assert not timing.undecided(_iv(0.90, 0.85, 0.96), aa)  # clearly faster
    assert not timing.undecided(_iv(0.99, 0.98, 1.01), aa)  # clearly inside
    assert timing.undecided(_iv(1.0, 0.5, 1.5), aa)  # far too wide: both edges
    # A noisy A/A pair (floor ±12.8 %): "no difference" against it is not a result yet.
    noisy = _iv(1.036, 0.948, 1.128)
    assert timing.verdict(_iv(0.990, 0.899, 1.029), noisy).word == timing.NO_DIFFERENCE
    assert timing.undecided(_iv(0.990, 0.899, 1.029), noisy)
    assert not timing.undecided(_iv(0.80, 0.78, 0.82), noisy)  # faster even so
    assert not timing.undecided(_iv(0.990, 0.899, 1.029), noisy, wide=0.15)


def test_bench_adds_rounds_while_undecided_up_to_the_limit(monkeypatch):
    """bench.time_config: a batch whose inlined interval straddles the floor's edge gets
    another batch; a clear one stops; the limit holds."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    import bench

    batches = []

    def scripted(calls, args, rounds, *, sync=None):
        # stock 1.0; A/A within ±2 % (floor: the least, 3 %); inlined 0.95 +- 0.03 in the
        # first batch (straddles 0.97), then exactly 0.95 (clear).
        n = len(batches)
        batches.append(rounds)
        spread = [0.92, 0.99, 0.93, 0.97, 0.94, 0.96] * (rounds // 6) if n == 0 else [0.95] * rounds
        aa = [0.99, 1.01, 0.98, 1.02, 1.0, 1.0] * (rounds // 6)
        return {"stock": [1.0] * rounds, "A/A": aa, "inlined": spread}

    monkeypatch.setattr(timing, "time_rounds", scripted)
    callers = {k: (lambda **kw: None) for k in ("stock", "A/A", "inlined")}
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=18
    )
    assert batches == [6, 6] and out["rounds"] == 12 and out["verdict"] == timing.FASTER
    assert out["placements"] == 2  # the second batch on new persistent transients
    batches.clear()
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=6
    )
    assert batches == [6] and out["rounds"] == 6 and out["verdict"] == timing.NO_DIFFERENCE


def test_more_rounds_past_the_round_limit_only_while_the_time_budget_lasts():
    assert timing.may_extend(12, 12, 36)  # within the round limit: always
    assert not timing.may_extend(36, 12, 36)  # past it, no budget: stop
    assert timing.may_extend(36, 12, 36, spent_s=10.0, budget_s=60.0)  # a cheap program: go on
    assert not timing.may_extend(36, 12, 36, spent_s=61.0, budget_s=60.0)  # an expensive one: stop
    assert not timing.may_extend(240, 12, 36, spent_s=1.0, budget_s=60.0)  # the cap: 20 x 12
    assert timing.may_extend(228, 12, 36, spent_s=1.0, budget_s=60.0)
    assert not timing.may_extend(24, 12, 36, spent_s=0.0, budget_s=60.0, cap_rounds=30)


def test_bench_extends_a_cheap_undecided_configuration_past_max_rounds(monkeypatch):
    """bench.time_config with a time budget: an interval that keeps straddling the floor's
    edge gets batches past --max-rounds until the cap (the fake calls take no time)."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    import bench

    batches = []

    def scripted(calls, args, rounds, *, sync=None):
        batches.append(rounds)
        aa = [0.96, 1.04, 0.99, 1.01, 0.995, 1.005] * (
            rounds // 6
        )  # floor 4 %, then the least, 3 %
        # an interval that keeps straddling the floor's edge, however many rounds
        return {
            "stock": [1.0] * rounds,
            "A/A": aa,
            "inlined": [0.955, 1.0, 0.96, 0.999, 0.965, 0.9995] * (rounds // 6),
        }

    monkeypatch.setattr(timing, "time_rounds", scripted)
    callers = {k: (lambda **kw: None) for k in ("stock", "A/A", "inlined")}
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=18, extend_s=60.0
    )
    assert out["rounds"] == 120 and out["verdict"] == timing.NO_DIFFERENCE  # 20 x 6: the cap
    batches.clear()
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=18
    )
    assert out["rounds"] == 18  # no budget: the round limit


def test_a_decided_configuration_gets_rounds_until_they_span_the_minimum_time():
    assert timing.short_span(12, 12, spent_s=3.0, min_span_s=20.0)  # 12 rounds in 3 s: one phase
    assert not timing.short_span(12, 12, spent_s=21.0, min_span_s=20.0)
    assert not timing.short_span(240, 12, spent_s=3.0, min_span_s=20.0)  # the cap: 20 x 12
    assert not timing.short_span(24, 12, spent_s=3.0, min_span_s=20.0, cap_rounds=30)


def test_bench_adds_rounds_to_a_clear_verdict_only_for_the_time_span(monkeypatch):
    """bench.time_config: a verdict that is clear after one batch still gets batches while
    the rounds span less than min_span_s (the fake calls take no time: up to the cap), and
    none without it."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    import bench

    batches = []

    def scripted(calls, args, rounds, *, sync=None):
        batches.append(rounds)
        aa = [0.99, 1.01, 0.98, 1.02, 1.0, 1.0] * (rounds // 6)
        return {
            "stock": [1.0] * rounds,
            "A/A": aa,
            "inlined": [0.80, 0.82, 0.81, 0.79, 0.80, 0.80] * (rounds // 6),
        }

    monkeypatch.setattr(timing, "time_rounds", scripted)
    callers = {k: (lambda **kw: None) for k in ("stock", "A/A", "inlined")}
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=6
    )
    assert batches == [6] and out["verdict"] == timing.FASTER
    batches.clear()
    out = bench.time_config(
        "fake", callers, {}, {}, rounds=6, threads=None, sync=None, max_rounds=6, min_span_s=1e6
    )
    assert len(batches) == 20 and out["rounds"] == 120 and out["verdict"] == timing.FASTER
    assert out["span_s"] < 1e6 and out["aa_reach"] == pytest.approx(
        0.0
    )  # the A/A interval narrowed to 1.000 [1.000..1.000]


def test_verdict_text_names_the_floor():
    aa = _iv(1.0, 0.97, 1.02)
    assert timing.verdict(_iv(0.8, 0.78, 0.82), aa).text() == (
        "faster: 0.800 [0.780..0.820]x stock, outside the A/A floor of ±3.0%"
    )
    assert timing.verdict(_iv(0.99, 0.96, 1.01), aa).text() == (
        "no measurable difference (0.990 [0.960..1.010] within the A/A floor of ±3.0%)"
    )


def test_omp_threads_says_when_no_openmp_runtime_is_loaded(monkeypatch):
    monkeypatch.setattr(timing, "loaded_openmp", lambda: None)
    with pytest.raises(RuntimeError, match="no OpenMP runtime loaded"):
        timing.omp_threads(1)


def _rows(*configs):
    """bench results rows: (program, mode, threads, verdict[, malloc]) per timed configuration."""
    rows: dict = {}
    for prog, mode, threads, word, *malloc in configs:
        row = rows.setdefault(prog, {"program": prog, "modes": {}})
        t = {"threads": threads, "verdict": word, **({"malloc": malloc[0]} if malloc else {})}
        row["modes"].setdefault(mode, {"timings": []})["timings"].append(t)
    return list(rows.values())


def test_two_runs_agree_per_program_mode_and_thread_count():
    from verdicts import agreement  # bench/verdicts.py

    a = _rows(("target", "default", 1, "faster"), ("target", "default", 2, "no measurable difference"),
              ("seed", "persistent", 1, "slower"))  # fmt: skip
    b = _rows(
        ("target", "default", 1, "faster"),
        ("target", "default", 2, "faster"),
        ("seed", "default", 1, "faster"),
    )
    assert agreement(a, b) == [
        ("target", "default", 1, "faster", "faster"),
        ("target", "default", 2, "no measurable difference", "faster"),
        ("seed", "persistent", 1, "slower", None),
        ("seed", "default", 1, None, "faster"),
    ]


def test_agreement_of_one_memory_mode():
    """A full run against a `--modes persistent` run: only the persistent rows are compared."""
    from verdicts import agreement  # bench/verdicts.py

    a = _rows(
        ("seed", "default", 1, "faster", "fresh"),
        ("seed", "persistent", 1, "no measurable difference", "fresh"),
    )
    b = _rows(("seed", "persistent", 1, "no measurable difference", "fresh"))
    assert agreement(a, b, "persistent") == [
        ("seed", "persistent/fresh", 1, "no measurable difference", "no measurable difference")
    ]
    assert ("seed", "default/fresh", 1, "faster", None) in agreement(a, b)


def test_allocator_regimes_are_configurations_of_their_own():
    from verdicts import agreement  # bench/verdicts.py

    a = _rows(
        ("scan", "default", 1, "faster", "fresh"),
        ("scan", "default", 1, "slower", "reuse"),
        ("seed", "default", 1, "faster"),
    )  # fmt: skip  (a run from before the regimes: glibc's own)
    b = _rows(("scan", "default", 1, "faster", "fresh"), ("scan", "default", 1, "slower", "reuse"),
              ("seed", "default", 1, "faster", "glibc"))  # fmt: skip
    assert agreement(a, b) == [
        ("scan", "default/fresh", 1, "faster", "faster"),
        ("scan", "default/reuse", 1, "slower", "slower"),
        ("seed", "default", 1, "faster", "faster"),
    ]


_PIN_SCRIPT = """
import json, sys
from gt4py_dace_xforms.measure import timing
regime = sys.argv[1]
out = {"unpinned": timing.reallocation_faults_per_mib()}
timing.pin_allocator(regime)
timing.pin_allocator(regime)  # the same again: nothing happens
out[regime] = timing.reallocation_faults_per_mib()
from gt4py_dace_xforms.policy import allocator
out["fresh_page_bytes"] = allocator.fresh_page_bytes()
for other in timing.ALLOCATORS:
    if other != regime:
        try:
            timing.pin_allocator(other)
        except RuntimeError as e:
            out[other] = str(e)
print(json.dumps(out))
"""


def test_pinned_allocator_decides_whether_a_freed_block_comes_back_with_new_pages():
    """In child processes (a pin holds for the rest of its process): `fresh` hands every
    16 MiB block back to the kernel, so the next one faults each 4 KiB page in again;
    `reuse` keeps it, so re-allocating faults nothing; and no other regime can be pinned
    afterwards."""
    import json
    import subprocess
    import sys

    for regime, ok in (
        ("fresh", lambda f: f > 200),
        ("reuse", lambda f: f < 8),
    ):  # 256 pages per MiB
        done = subprocess.run(
            [sys.executable, "-c", _PIN_SCRIPT, regime], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert ok(got[regime]), got
        # the cost model is told which arrays get fresh pages in the pinned regime
        assert got["fresh_page_bytes"] == (128 * 1024 if regime == "fresh" else 32 * 2**20), got
        assert all("in a process of its own" in got[o] for o in timing.ALLOCATORS if o != regime), (
            got
        )


def test_pin_allocator_rejects_an_unknown_regime_without_pinning():
    before = list(timing._pinned)
    with pytest.raises(ValueError, match="unknown allocator regime 'heap'"):
        timing.pin_allocator("heap")
    assert timing._pinned == before  # nothing pinned by the bad call


@pytest.mark.compile
def test_replace_persistent_gives_a_build_new_persistent_transients():
    """timing.compiled_sdfgs finds the compiled SDFG a call runs (compiled_sdfg_calls:
    with how often it ran); replace_persistent
    finalizes it, and the next call initializes it again (new persistent transients) and
    still computes the same."""
    import dace
    import numpy as np

    n = 64

    @dace.program
    def probe(a: dace.float64[n], b: dace.float64[n]):
        t = a * 2.0
        b[:] = t + 1.0

    sdfg = probe.to_sdfg(simplify=True)
    persistent = [d for d in sdfg.arrays.values() if d.transient]
    assert persistent, "the probe needs a transient"
    for d in persistent:
        d.lifetime = dace.AllocationLifetime.Persistent
    csdfg = sdfg.compile()
    a = np.arange(n, dtype=np.float64)
    b = np.zeros(n)

    handles = timing.compiled_sdfgs(lambda: csdfg(a=a, b=b))
    assert handles == [csdfg] and csdfg._initialized  # DaCe's own record of __dace_init
    np.testing.assert_array_equal(b, 2.0 * a + 1.0)
    # with the counts: one entry per compiled SDFG, however often it ran
    assert timing.compiled_sdfg_calls(lambda: (csdfg(a=a, b=b), csdfg(a=a, b=b))) == [(csdfg, 2)]

    timing.replace_persistent(handles)
    assert not csdfg._initialized
    b[:] = 0.0
    csdfg(a=a, b=b)
    assert csdfg._initialized
    np.testing.assert_array_equal(b, 2.0 * a + 1.0)
    timing.replace_persistent(handles)  # released for good at the end, as after a run
    timing.replace_persistent(handles)  # and a second time is a no-op
