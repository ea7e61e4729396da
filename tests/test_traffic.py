"""tools.traffic: the bytes of a 2-D transient from an SDFG's memlets (hand-built, exact), and
the substep list's structure on a cheap icon4py program (lowered static, no compilation)."""

import copy

import dace
import pytest

from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.tools import traffic


N, K = 10, 5


def one_writer_two_readers() -> dace.SDFG:
    """`T = a + 1` (one Map, N x K), `b = T[k] + T[k+1]` (k < K-1: two offsets, one reader)
    and `c = 2 T` (another reader): T is written once and read by two Maps."""
    sdfg = dace.SDFG("traffic_one_writer_two_readers")
    for name, shape in (("a", (N, K)), ("b", (N, K - 1)), ("c", (N, K))):
        sdfg.add_array(name, shape, dace.float64)
    sdfg.add_array("T", (N, K), dace.float64, transient=True)
    state = sdfg.add_state("s")
    t = state.add_access("T")
    state.add_mapped_tasklet(
        "producer",
        {"i": f"0:{N}", "k": f"0:{K}"},
        {"x": dace.Memlet("a[i, k]")},
        "y = x + 1",
        {"y": dace.Memlet("T[i, k]")},
        external_edges=True,
        output_nodes={"T": t},
    )
    state.add_mapped_tasklet(
        "shifted",
        {"i": f"0:{N}", "k": f"0:{K - 1}"},
        {"x0": dace.Memlet("T[i, k]"), "x1": dace.Memlet("T[i, k + 1]")},
        "y = x0 + x1",
        {"y": dace.Memlet("b[i, k]")},
        external_edges=True,
        input_nodes={"T": t},
    )
    state.add_mapped_tasklet(
        "scaled",
        {"i": f"0:{N}", "k": f"0:{K}"},
        {"x": dace.Memlet("T[i, k]")},
        "y = 2 * x",
        {"y": dace.Memlet("c[i, k]")},
        external_edges=True,
        input_nodes={"T": t},
    )
    sdfg.validate()
    return sdfg


def test_one_writer_two_readers_bytes_exact():
    t = traffic.array_traffic(one_writer_two_readers(), "T")
    assert t.shape == (N, K) and t.itemsize == 8
    assert t.writers == 1 and t.written_bytes == N * K * 8  # written once
    # the shifted reader reads T[:, 0:K-1] and T[:, 1:K]: its box, N x K, once; the other N x K
    assert t.readers == 2 and t.read_bytes == 2 * N * K * 8
    assert t.read_accesses == N * (K - 1) * 2 + N * K  # every access, for the JSON
    assert t.total_bytes == 3 * N * K * 8 and t.notes == []
    assert traffic.two_d_transients(one_writer_two_readers()) == ["T"]
    assert traffic.kind_of((N, K)) == "field" and traffic.kind_of((N, 1)) == "level"


def _without_t(sdfg: dace.SDFG) -> dace.SDFG:
    """The same program with T gone (what an inline leaves, for the matching)."""
    lib = copy.deepcopy(sdfg)
    state = lib.states()[0]
    for node in [n for n in state.data_nodes() if n.data == "T"]:
        state.remove_node(node)
    lib.remove_data("T", validate=False)
    return lib


def test_rows_say_removed_by_which_rewrite_or_why_kept():
    stock = one_writer_two_readers()
    rec = InlineRecord("s", "T", "shifted", (("0", "0"), ("0", "1")), True, "", True, None, "lazy")
    got = traffic.compare_builds(
        "p",
        stock,
        _without_t(stock),
        InlineReport([rec]),
        calls_first=2,
        calls_later=1,
        calls=1,
        stock_post=["T"],
    )
    (row,) = got.rows
    assert row.status == "removed" and row.by == "inline, concat mode lazy (shifted)"
    assert (
        row.per_call_bytes == 3 * N * K * 8
        and row.substep_bytes == row.per_call_bytes
        and row.at_post
    )
    assert got.stock_bytes == got.removed_bytes == row.substep_bytes and got.library_bytes == 0

    declined = InlineRecord("s", "T", "scaled", (("0", "0"),), False, "recomputes too much")
    kept = traffic.compare_builds(
        "p", stock, copy.deepcopy(stock), InlineReport([declined]), calls=2
    )
    (row,) = kept.rows
    assert row.status == "kept" and row.by == "declined for scaled: recomputes too much"
    assert (
        kept.removed_bytes == 0
        and kept.stock_bytes == 2 * row.per_call_bytes == kept.library_substep_bytes
    )

    # gone without a decision, while the library has an array stock lacks: not guessed
    lib = _without_t(stock)
    lib.add_array("gtir_tmp_new", (N, K), dace.float64, transient=True)
    odd = traffic.compare_builds("p", stock, lib, InlineReport(), calls=1)
    assert odd.rows[0].status == "unmatched" and "gtir_tmp_new" in odd.rows[0].by
    assert odd.library_only == {"gtir_tmp_new": 0}
    gone = traffic.compare_builds("p", stock, _without_t(stock), InlineReport(), calls=1)
    assert gone.rows[0].status == "removed (no decision of its own)"


@pytest.mark.icon4py
def test_substep_program_list_is_consistent():
    """A cheap substep program on a small decomposed limited-area layout: rows sorted by
    substep bytes, totals that add up, every stock 2-D transient listed with a status and
    a reason."""
    pytest.importorskip("icon4py.model.atmosphere.dycore")
    name = "compute_perturbed_quantities_and_interpolation"
    result = traffic.substep_traffic("lam-decomposed", n_cells=512, n_levels=10, programs=[name])
    (prog,) = result.programs
    assert prog.error is None, prog.error
    assert prog.calls == 1 and prog.calls_first == 1
    assert (
        prog.static and result.layout == "lam-decomposed"
    )  # lowered static, on the layout's bounds
    rows = result.rows
    assert rows, "stock keeps 2-D transients in this program"
    assert [r.substep_bytes for r in rows] == sorted((r.substep_bytes for r in rows), reverse=True)
    assert sorted(r.name for r in rows) == prog.stock_final  # every stock 2-D transient, once
    for r in rows:
        assert r.status in ("kept", "removed", "removed (no decision of its own)", "unmatched")
        assert r.by, r
        assert r.written_bytes > 0 and r.read_bytes > 0 and r.readers >= 1
        assert r.substep_bytes == (r.written_bytes + r.read_bytes) * r.calls
    t = result.totals()
    assert t["stock"] == sum(r.substep_bytes for r in rows)
    assert t["removed"] == sum(r.substep_bytes for r in rows if r.removed)
    assert t["remaining"] == t["stock"] - t["removed"]
    text = result.text()
    assert all(r.name in text for r in rows) and "TOTAL" in text


def test_program_limit_beside_both_builds():
    """The compulsory bytes (issue 61, item 3): `a` read once, `b` and `c` written once; the
    transient T is no part of it. Stock moves the limit through its arguments plus T's
    3 N K x 8 bytes; the library's build without T, the limit alone."""
    stock = one_writer_two_readers()
    got = traffic.compare_builds(
        "p", stock, _without_t(stock), InlineReport(), calls=2, sizes={"Cell": N, "K": K}
    )
    limit = (N * K + N * (K - 1) + N * K) * 8
    assert got.limit["bytes"] == limit and got.limit["fill_bytes"] == limit
    assert got.limit["read_bytes"] == N * K * 8 and got.limit["notes"] == []
    assert got.stock_args_bytes == got.library_args_bytes == limit
    assert got.limit_substep_bytes == 2 * limit
    assert got.stock_total_bytes == 2 * limit + 2 * 3 * N * K * 8
    assert got.library_total_bytes == 2 * limit
    table = traffic.SubstepTraffic("lam", N, K, "later", "cpu", [got])
    assert table.totals()["limit"] == 2 * limit
    text = table.text()
    assert "stock/limit" in text and "library/limit" in text
    row = next(line for line in text.splitlines() if line.startswith("p "))
    assert (
        f"{(2 * limit + 6 * N * K * 8) / (2 * limit):.2f}" in row.split() and "1.00" in row.split()
    )
    assert '"limit_substep_bytes"' in table.to_json()


@pytest.mark.icon4py
def test_cli_traffic_prints_the_limit(tmp_path, capsys):
    """`traffic` on a program without 2-D transients: the per-program table gives its
    compulsory bytes, stock and the library at 1.00 of it (each argument read by one Map);
    the JSON carries it."""
    pytest.importorskip("icon4py.model.atmosphere.dycore")
    import json

    from gt4py_dace_xforms.cli.main import main

    out = tmp_path / "t.json"
    name = "compute_dwdz_for_divergence_damping"
    argv = ["traffic", "--programs", name, "--cells", "512", "--levels", "10", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    head = next(line for line in text.splitlines() if line.startswith("program "))
    assert head.split()[-4:] == ["limit", "stock/limit", "library/limit", "s"]
    row = next(line for line in text.splitlines() if line.startswith(name)).split()
    assert row[-3:-1] == ["1.00", "1.00"] and float(row[-4]) > 0
    doc = json.loads(out.read_text())
    (prog,) = doc["programs"]
    assert prog["limit"]["bytes"] > 0 and prog["limit_substep_bytes"] == prog["limit"]["bytes"]
    assert doc["totals"]["limit"] == prog["limit_substep_bytes"]


def test_memlet_figures_agree_with_the_generated_code():
    """DaCe's generated C++ (not compiled) of the hand-built SDFG: T's allocation, the
    distinct elements each loop nest writes and reads, and the number of reading nests are
    the memlet figures."""
    sdfg = one_writer_two_readers()
    t = traffic.array_traffic(sdfg, "T")
    code = next(c.clean_code for c in sdfg.generate_code() if c.title == "Frame")
    c = traffic.codegen_count(code, "T")
    assert c.allocated == N * K and c.notes == []
    assert c.written * 8 == t.written_bytes and c.read * 8 == t.read_bytes
    assert (c.writer_nests, c.reader_nests) == (t.writers, t.readers)


def test_cli_traffic_bad_input_is_one_line(capsys):
    from gt4py_dace_xforms.cli.main import main

    assert (
        main(["traffic", "--programs", "no_such_program", "--cells", "512", "--levels", "10"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "gt4py-dace-xforms: error: not a substep program: ['no_such_program']"
    )
