"""InlineFuser on hand-built SDFGs: structure, compile-and-compare, declines."""

import copy
import json

import dace
import numpy as np
import pytest
from builders import compare_before_after, inlined_copies, producer_consumer, transient_arrays

import gt4py_dace_xforms as gx


SOUND = gx.InlineWhereSound()  # these tests are about soundness: inline whatever is sound


RNG = np.random.default_rng(42)


def _inline(sdfg):
    after = copy.deepcopy(sdfg)
    report = gx.gt_inline_intermediates(after, policy=SOUND)
    return after, report


# ---- shapes ------------------------------------------------------------------------------


def two_symbol_2d():
    """gt4py's index form: `i - s0`, `k - ks`; reads at k, k+1, k+2 (offsets from a range start)."""
    return producer_consumer(
        "two_symbol_2d",
        symbols=("s0", "ks"),
        producer_ranges={"i": "s0:N+s0", "k": "ks:K+ks"},
        consumer_ranges={"i": "s0:N+s0", "k": "ks:K+ks-2"},
        write="i - s0, k - ks",
        reads=["i - s0, k - ks", "i - s0, k - ks + 1", "i - s0, k - ks + 2"],
    )


def two_symbol_3d():
    return producer_consumer(
        "two_symbol_3d",
        params=("i", "j", "k"),
        shape=("N", "M", "K"),
        symbols=("s0", "ks"),
        producer_ranges={"i": "s0:N+s0", "j": "0:M", "k": "ks:K+ks"},
        consumer_ranges={"i": "s0:N+s0", "j": "0:M", "k": "ks+1:K+ks"},
        write="i - s0, j, k - ks",
        reads=["i - s0, j, k - ks - 1", "i - s0, j, k - ks"],
    )


def offset_ranges():
    """Producer iterates over a window shifted against the consumer's; write index compensates."""
    return producer_consumer(
        "offset_ranges",
        producer_ranges={"i": "0:N", "k": "3:K+3"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k - 3",
        input_index="i, k - 3",
        reads=["i, k", "i, k + 1"],
        out_index="i, k",
    )


def negative_offsets():
    return producer_consumer(
        "negative_offsets",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "2:K"},
        write="i, k",
        reads=["i, k - 2", "i, k - 1"],
    )


def one_offset_many_edges():
    """Three edges read the same element `k+1`: one copy, shared."""
    return producer_consumer(
        "one_offset_many_edges",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1", "i, k + 1", "i, k + 1"],
        consumer_code="__o = __t0 * __t1 - __t2",
    )


SHAPES = {
    "two_symbol_2d": (
        two_symbol_2d,
        3,
        dict(N=5, K=9, s0=2, ks=1),
        lambda t: t[:, :-2] + 2 * t[:, 1:-1] + 3 * t[:, 2:],
    ),
    "two_symbol_3d": (
        two_symbol_3d,
        2,
        dict(N=4, M=3, K=7, s0=1, ks=3),
        lambda t: t[..., :-1] + 2 * t[..., 1:],
    ),
    "offset_ranges": (offset_ranges, 2, dict(N=5, K=9), lambda t: t[:, :-1] + 2 * t[:, 1:]),
    "negative_offsets": (negative_offsets, 2, dict(N=5, K=9), lambda t: t[:, :-2] + 2 * t[:, 1:-1]),
    "one_offset_many_edges": (
        one_offset_many_edges,
        1,
        dict(N=5, K=9),
        lambda t: t[:, 1:] * t[:, 1:] - t[:, 1:],
    ),
}


def _arrays(sdfg, syms):
    shape = [int(dace.symbolic.evaluate(s, syms)) for s in sdfg.arrays["a"].shape]
    return {"a": RNG.random(shape), "out": np.zeros(shape)}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_structure_one_copy_per_distinct_offset(shape):
    build, n_offsets, _, _ = SHAPES[shape]
    before = build()
    after, report = _inline(before)
    assert [r.intermediate for r in report.applied] == ["tmp"]
    assert "tmp" not in after.arrays
    assert transient_arrays(after) == []
    assert inlined_copies(after) == n_offsets == report.copies
    after.validate()
    # The result round-trips through JSON (what the viewer and the cache do).
    again = dace.SDFG.from_json(json.loads(json.dumps(after.to_json())))
    again.validate()
    assert inlined_copies(again) == n_offsets


@pytest.mark.compile
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_compiled_results_equal_untransformed_and_numpy(shape):
    build, _, syms, reference = SHAPES[shape]
    before = build()
    after, _ = _inline(before)
    arrays = _arrays(before, syms)
    got = compare_before_after(before, after, arrays, syms)
    t = 2.0 * arrays["a"] + 1.0
    expected = reference(t)
    if shape == "negative_offsets":
        np.testing.assert_allclose(got["out"][:, 2:], expected, rtol=1e-14)
    elif shape == "two_symbol_3d":
        np.testing.assert_allclose(got["out"][..., 1:], expected, rtol=1e-14)
    else:
        np.testing.assert_allclose(got["out"][:, : expected.shape[1]], expected, rtol=1e-14)


# ---- declines ----------------------------------------------------------------------------


def not_covered():
    """The consumer reads k+1 up to K, the producer only computes up to K-1."""
    return producer_consumer(
        "not_covered",
        producer_ranges={"i": "0:N", "k": "0:K-1"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1"],
    )


def unknown_coverage():
    """Producer range ends at a symbol unrelated to the consumer's: undecidable."""
    return producer_consumer(
        "unknown_coverage",
        symbols=("P",),
        producer_ranges={"i": "0:N", "k": "0:P"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1"],
    )


def wcr_write():
    return producer_consumer(
        "wcr_write",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1"],
        write_wcr="lambda x, y: x + y",
    )


def global_intermediate():
    return producer_consumer(
        "global_intermediate",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k + 1"],
        tmp_transient=False,
    )


def mixed_params():
    """`tmp[i, k + i]` mixes two consumer parameters in one index."""
    return producer_consumer(
        "mixed_params",
        shape=("N", "N"),
        producer_ranges={"i": "0:N", "k": "0:N"},
        consumer_ranges={"i": "0:N", "k": "0:1"},
        write="i, k",
        reads=["i, k + i"],
    )


DECLINES = {
    "not_covered": (not_covered, "does not cover"),
    "unknown_coverage": (unknown_coverage, "cannot be proven to cover"),
    "wcr_write": (wcr_write, "WCR"),
    "global_intermediate": (global_intermediate, "global"),
    "mixed_params": (mixed_params, "mixes map parameters"),
}


@pytest.mark.parametrize("shape", sorted(DECLINES))
def test_decline_leaves_sdfg_unchanged(shape):
    build, reason = DECLINES[shape]
    sdfg = build()
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=SOUND)
    assert report.applied == []
    assert any(reason in r.reason for r in report.declined), report.table()
    assert sdfg.hash_sdfg() == before
    assert sdfg.apply_transformations(gx.InlineFuser) == 0
    assert sdfg.hash_sdfg() == before
