"""Sibling tails (analysis/sibling_tail.py, transformations/sibling_tail.py,
docs/sibling_tail.md): `X = Y + r` written by the Map that writes `Y`, where `Y` stays for
another reader. Inlining `X` whole recomputes `Y`'s slice (declined); its tail alone,
reading `Y` back, recomputes nothing. Compiled against the untransformed SDFG and numpy;
hostile variants decline and leave the SDFG unchanged."""

import json

import dace
import numpy as np
import pytest
from builders import compare_before_after

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.sibling_tail import sibling_tail_plan
from gt4py_dace_xforms.policy.decide import readers_accepted
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.transformations.sibling_tail import gt_split_sibling_tails


N, K = 8, 6
# Y's slice: enough work that recomputing it in X's reader does not pay.
HEAVY = (
    "__y = sqrt(__a * __a + 1.0) * exp(0.1 * __a) + log(__a + 2.0) / (__a + 3.0) + __a * __a * __a"
)


def build(variant: str = "") -> dace.SDFG:
    sdfg = dace.SDFG(f"sibling_tail{('_' + variant) if variant else ''}")
    for name in ("a", "r", "out", "out2"):
        sdfg.add_array(name, (N, K), dace.float64)
    ytype = dace.float32 if variant == "narrow" else dace.float64
    sdfg.add_array("Y", (N, K + 1), ytype, transient=True)
    sdfg.add_array("X", (N, K), dace.float64, transient=True)
    sdfg.add_scalar("s", dace.float64, transient=True)
    st = sdfg.add_state("main")
    a, r, y, x = st.add_access("a"), st.add_access("r"), st.add_access("Y"), st.add_access("X")
    me, mx = st.add_map("producer", {"i": f"0:{N}", "k": f"0:{K}"})
    heavy = st.add_tasklet("heavy", {"__a"}, {"__y"}, HEAVY)
    s = st.add_access("s")
    tail = st.add_tasklet("tail", {"__s", "__r"}, {"__x"}, "__x = __s + __r")
    st.add_memlet_path(a, me, heavy, dst_conn="__a", memlet=dace.Memlet("a[i, k]"))
    st.add_edge(heavy, "__y", s, None, dace.Memlet("s[0]"))
    y_index = "Y[i, k + 1]" if variant == "shifted" else "Y[i, k]"
    st.add_memlet_path(s, mx, y, memlet=dace.Memlet(y_index))
    st.add_edge(s, None, tail, "__s", dace.Memlet("s[0]"))
    st.add_memlet_path(r, me, tail, dst_conn="__r", memlet=dace.Memlet("r[i, k]"))
    if variant == "reads_inside":  # the tail also reads an input of Y's slice's inside
        sdfg.add_scalar("b", dace.float64, transient=True)
        inner = st.add_tasklet("inner", {"__a"}, {"__b"}, "__b = 2.0 * __a")
        b = st.add_access("b")
        st.add_memlet_path(a, me, inner, dst_conn="__a", memlet=dace.Memlet("a[i, k]"))
        st.add_edge(inner, "__b", b, None, dace.Memlet("b[0]"))
        tail.add_in_connector("__b")
        tail.code = dace.properties.CodeBlock("__x = __s + __r + __b")
        st.add_edge(b, None, tail, "__b", dace.Memlet("b[0]"))
        heavy.add_in_connector("__b")
        heavy.code = dace.properties.CodeBlock(HEAVY + " + __b")
        st.add_edge(b, None, heavy, "__b", dace.Memlet("b[0]"))
    st.add_memlet_path(tail, mx, x, src_conn="__x", memlet=dace.Memlet("X[i, k]"))
    # X's reader; Y's reader (Y stays), both pointwise.
    st.add_mapped_tasklet(
        "x_reader",
        {"i": f"0:{N}", "k": f"0:{K}"},
        {"__x": dace.Memlet("X[i, k]")},
        "__o = 3.0 * __x",
        {"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"X": x},
    )
    y_read = "Y[i, k + 1]" if variant == "shifted" else "Y[i, k]"
    st.add_mapped_tasklet(
        "y_reader",
        {"i": f"0:{N}", "k": f"0:{K - 1}"},
        {"__y0": dace.Memlet(y_read), "__y1": dace.Memlet(y_read.replace("k]", "k + 1]"))},
        "__o = __y1 - __y0",
        {"__o": dace.Memlet("out2[i, k]")},
        external_edges=True,
        input_nodes={"Y": y},
    )
    sdfg.validate()
    return sdfg


def _inputs():
    rng = np.random.default_rng(3)
    return {
        "a": rng.random((N, K)),
        "r": rng.random((N, K)),
        "out": np.zeros((N, K)),
        "out2": np.zeros((N, K)),
    }


def _numpy(a, r):
    y = np.sqrt(a * a + 1.0) * np.exp(0.1 * a) + np.log(a + 2.0) / (a + 3.0) + a * a * a
    out2 = np.zeros((N, K))
    out2[:, : K - 1] = y[:, 1:] - y[:, : K - 1]
    return 3.0 * (y + r), out2


def _plan(sdfg):
    st = sdfg.start_state
    (x,) = [n for n in st.data_nodes() if n.data == "X"]
    return sibling_tail_plan(sdfg, st, st.in_edges(x)[0])


def _json(sdfg):
    return json.dumps(sdfg.to_json(), sort_keys=True)


def test_the_tail_is_the_addition():
    plan = _plan(build())
    assert not isinstance(plan, Decline), plan
    assert plan.y_name == "Y" and [n.label for n in plan.tail] == ["tail"]


def test_whole_declined_the_tail_taken_and_the_same_values():
    before, after = build(), build()
    policy = gx.CostModel("cpu")
    report = gx.gt_inline_intermediates(after, policy=policy)
    tails = [r for r in report.records if r.mode == "sibling_tail"]
    assert [r.intermediate for r in tails] == ["X"]
    assert "X" not in two_d_transients(after) and "Y" in two_d_transients(after)
    # Without the split the cost model keeps X: recomputing Y's slice does not pay.
    assert readers_accepted(build(), "X", policy) is not None
    arrays = _inputs()
    got = compare_before_after(before, after, arrays, {}, outputs=("out", "out2"))
    out, out2 = _numpy(arrays["a"], arrays["r"])
    np.testing.assert_allclose(got["out"], out, rtol=1e-14)
    np.testing.assert_allclose(got["out2"], out2, rtol=1e-13)


def test_a_policy_that_declines_the_tail_too_leaves_the_sdfg_unchanged():
    sdfg = build()
    before = _json(sdfg)
    assert (
        gt_split_sibling_tails(
            sdfg, policy=gx.CostModel("cpu", max_distinct_offsets=0)
        ).sibling_tails_split
        == []
    )
    assert _json(sdfg) == before


@pytest.mark.parametrize(
    "variant, reason",
    [
        ("narrow", "does not hold the value's type"),
        ("shifted", "written at another index"),
        ("reads_inside", "the tail reads 'b', not only the sibling's value"),
    ],
)
def test_hostile_variants_decline_unchanged(variant, reason):
    sdfg = build(variant)
    plan = _plan(sdfg)
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    before = _json(sdfg)
    assert gt_split_sibling_tails(sdfg, policy=gx.CostModel("cpu")).sibling_tails_split == []
    assert _json(sdfg) == before
