"""analysis.compulsory: the least traffic of a program (issue 61, item 3). A hand-built
SDFG whose compulsory bytes are known exactly (checked against numpy), and the simulated
last-level misses of a cold call never below its floor."""

import dace
import numpy as np
import pytest

from gt4py_dace_xforms.analysis.compulsory import compulsory_traffic, size_symbols
from gt4py_dace_xforms.measure import counts


N, K = 10, 8


def offsets_program(n: int = N, k: int = K, in_place: bool = False) -> dace.SDFG:
    """`T[i, k] = a[i, k] + a[i, k + 1]` (k < K - 1; `T[i, K-1] = a[i, K-1]`),
    `out[i, k] = T[i, k] + b[i, k] + b[i + 1, k]` (i < N - 1; the last row `T + b`): two
    n x k inputs read at offsets, whole, one output written whole, a transient between.
    `in_place`: `out` is also read (`out += ...`), a field updated in place."""
    sdfg = dace.SDFG(f"compulsory_offsets{'_in_place' if in_place else ''}")
    for name in ("a", "b", "out"):
        sdfg.add_array(name, (n, k), dace.float64)
    sdfg.add_array("T", (n, k), dace.float64, transient=True)
    state = sdfg.add_state("s")
    t = state.add_access("T")
    state.add_mapped_tasklet(
        "shifted",
        {"i": f"0:{n}", "j": f"0:{k - 1}"},
        {"x0": dace.Memlet("a[i, j]"), "x1": dace.Memlet("a[i, j + 1]")},
        "y = x0 + x1",
        {"y": dace.Memlet("T[i, j]")},
        external_edges=True,
        output_nodes={"T": t},
    )
    state.add_mapped_tasklet(
        "top",
        {"i": f"0:{n}"},
        {"x": dace.Memlet(f"a[i, {k - 1}]")},
        "y = x",
        {"y": dace.Memlet(f"T[i, {k - 1}]")},
        external_edges=True,
        output_nodes={"T": t},
    )
    extra = {"o": dace.Memlet("out[i, j]")} if in_place else {}
    plus = " + o" if in_place else ""
    state.add_mapped_tasklet(
        "combine",
        {"i": f"0:{n - 1}", "j": f"0:{k}"},
        {
            "x": dace.Memlet("T[i, j]"),
            "b0": dace.Memlet("b[i, j]"),
            "b1": dace.Memlet("b[i + 1, j]"),
            **extra,
        },
        f"y = x + b0 + b1{plus}",
        {"y": dace.Memlet("out[i, j]")},
        external_edges=True,
        input_nodes={"T": t},
    )
    state.add_mapped_tasklet(
        "last_row",
        {"j": f"0:{k}"},
        {
            "x": dace.Memlet(f"T[{n - 1}, j]"),
            "b0": dace.Memlet(f"b[{n - 1}, j]"),
            **({"o": dace.Memlet(f"out[{n - 1}, j]")} if in_place else {}),
        },
        f"y = x + b0{plus}",
        {"y": dace.Memlet(f"out[{n - 1}, j]")},
        external_edges=True,
        input_nodes={"T": t},
    )
    sdfg.validate()
    return sdfg


def reference(a: np.ndarray, b: np.ndarray, out: np.ndarray, in_place: bool) -> np.ndarray:
    t = a.copy()
    t[:, :-1] = a[:, :-1] + a[:, 1:]
    got = t + b
    got[:-1] += b[1:]
    return got + out if in_place else got


@pytest.mark.parametrize("in_place", [False, True])
def test_hand_built_program_compulsory_bytes_exact(in_place):
    sdfg = offsets_program(in_place=in_place)
    got = compulsory_traffic(sdfg)
    field = N * K * 8  # 640 bytes
    assert set(got.arrays) == {"a", "b", "out"}  # the transient T is not an argument
    assert got.arrays["a"].read == ((0, N - 1), (0, K - 1)) and got.arrays["a"].written is None
    assert got.arrays["b"].read_bytes == field and got.arrays["out"].written_bytes == field
    if in_place:  # out read once and written once: twice in the limit, once in the fills
        assert got.bytes == 4 * field and got.fill_bytes == 3 * field
    else:
        assert got.bytes == got.fill_bytes == 3 * field
    assert got.read_bytes + got.written_bytes == got.bytes and got.notes == []
    assert got.as_dict()["bytes"] == got.bytes


@pytest.mark.compile
@pytest.mark.parametrize("in_place", [False, True])
def test_hand_built_program_computes_what_numpy_does(in_place):
    rng = np.random.default_rng(61)
    a, b, out = (rng.random((N, K)) for _ in range(3))
    want = reference(a, b, out, in_place)
    offsets_program(in_place=in_place)(a=a, b=b, out=out)
    np.testing.assert_allclose(out, want)


def test_symbols_and_gt4py_range_rule():
    """A symbolic domain is evaluated at the call's values; gt4py's per-argument origins
    are 0 and its ends the grid's extent of the dimension (`sizes`)."""
    sdfg = dace.SDFG("compulsory_symbolic")
    sdfg.add_symbol("hstart", dace.int32)
    sdfg.add_array(
        "x", ("__x_Cell_range_1 - __x_Cell_range_0", "__x_K_range_1 - __x_K_range_0"), dace.float64
    )
    sdfg.add_array(
        "y", ("__y_Cell_range_1 - __y_Cell_range_0", "__y_K_range_1 - __y_K_range_0"), dace.float64
    )
    state = sdfg.add_state()
    state.add_mapped_tasklet(
        "m",
        {"i": "hstart:20", "k": "0:5"},
        {"v": dace.Memlet("x[i - __x_Cell_range_0, k - __x_K_range_0]")},
        "w = v",
        {"w": dace.Memlet("y[i - __y_Cell_range_0, k - __y_K_range_0]")},
        external_edges=True,
    )
    assert size_symbols(sdfg, {"Cell": 30, "K": 5})["__x_Cell_range_1"] == 30
    got = compulsory_traffic(sdfg, {"hstart": 4}, sizes={"Cell": 30, "K": 5})
    assert got.arrays["x"].read == ((4, 19), (0, 4)) and got.bytes == 2 * 16 * 5 * 8
    # the bound left symbolic (no hstart): the array's whole extent in that dimension, noted
    whole = compulsory_traffic(sdfg, sizes={"Cell": 30, "K": 5})
    assert whole.arrays["x"].read == ((0, 29), (0, 4)) and whole.notes


# --- the floor of the simulated misses -----------------------------------------------------------


@pytest.mark.compile
@pytest.mark.skipif(counts.valgrind() is None, reason="valgrind is not installed")
@pytest.mark.parametrize("in_place", [False, True])
def test_cold_call_misses_never_below_the_fill_floor(tmp_path, in_place):
    """The replay evicts the arguments before the call (`counts_replay`): each line of an
    argument the call touches misses once at least, on a read or on a write (callgrind's
    cache is write-allocate and counts no write-back). So the data misses times the line
    are never below the fill bytes, in either model; with no field updated in place the
    fill bytes are the limit itself. Measured, 256 x 80: 1.35x the fill floor in both
    models (the transient T: one more field); updated in place, 1.01x the limit (read + written)."""
    n, k = 256, 80
    sdfg = offsets_program(n, k, in_place)
    floor = compulsory_traffic(sdfg)
    args = dace.Config.get("compiler", "cpu", "args") + " -mno-avx512f"  # valgrind 3.19
    with dace.config.set_temporary("compiler", "cpu", "args", value=args):
        compiled = sdfg.compile()
    rng = np.random.default_rng(3)
    a, b, out = (rng.random((n, k)) for _ in range(3))
    [folder] = counts.capture_call(lambda: compiled(a=a, b=b, out=out), tmp_path)
    for cache, (_, _, (_, _, line)) in counts.CACHES.items():
        ev = counts.count_call(folder, cache).events
        data_bytes = (ev["DLmr"] + ev["DLmw"]) * line
        assert data_bytes >= floor.fill_bytes, (cache, ev, floor.as_dict())
        if not in_place:
            assert data_bytes >= floor.bytes
        # and not far above it: the transient T (written and read once) is the rest
        assert data_bytes <= floor.fill_bytes + 2 * n * k * 8 + 64 * line, (cache, ev)


def test_a_read_through_a_table_counts_its_whole_array_and_says_so():
    """gt4py's memlet for a read it cannot bound (a neighbor table, a vertical offset field)
    names the array's own extent: the box is the whole array, flagged `upper_bound`."""
    sdfg = dace.SDFG("compulsory_whole_extent")
    sdfg.add_array("x", ("__x_Cell_range_1 - __x_Cell_range_0",), dace.float64)
    sdfg.add_array("tab", (6,), dace.int32)
    sdfg.add_array("y", (6,), dace.float64)
    state = sdfg.add_state()
    x, tab, y = state.add_read("x"), state.add_read("tab"), state.add_write("y")
    entry, exit_ = state.add_map("m", {"i": "0:6"})
    t = state.add_tasklet("gather", {"field", "j"}, {"o"}, "o = field[j]")
    state.add_memlet_path(
        x,
        entry,
        t,
        dst_conn="field",
        memlet=dace.Memlet("x[0:__x_Cell_range_1 - __x_Cell_range_0]"),
    )
    state.add_memlet_path(tab, entry, t, dst_conn="j", memlet=dace.Memlet("tab[i]"))
    state.add_memlet_path(t, exit_, y, src_conn="o", memlet=dace.Memlet("y[i]"))
    got = compulsory_traffic(sdfg, sizes={"Cell": 100})
    assert got.arrays["x"].upper_bound and got.arrays["x"].read_bytes == 100 * 8
    assert not got.arrays["tab"].upper_bound and got.arrays["tab"].read_bytes == 6 * 4
    assert got.upper_bound_bytes == 800 and got.bytes == 800 + 24 + 48
