"""`WriteBackRetarget` (analysis/retarget.py, transformations/retarget.py, docs/writeback.md):
the writers of a write-back buffer write the program output directly once the copy is the
buffer's only reader. Hand-built SDFGs in gt4py's shape (a Map writing a transient on
more levels than the copy takes, a copy into the output in a later state), the hostile
variants that must be declined unchanged, and the lowered gt4py program compiled against
stock and numpy."""

import copy

import dace
import numpy as np
import pytest

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.retarget import retarget_plan
from gt4py_dace_xforms.tools.compare import two_d_transients


N, K = 8, 6


def build(
    *,
    shift: int = 1,
    between: str = "",
    writer_extra: str = "",
    reader: str = "",
    conditional: bool = False,
    split: int = 0,
    gap: int = 0,
    rows: int = 0,
):
    """`T[i, k] = 2 a[i, k] + 1` on `K + 1` levels (state `w`), `G[i, k] = T[i, k + shift]`
    on `K` levels (state `c`); the variants add what must make the rewrite decline."""
    sdfg = dace.SDFG(
        f"retarget_{shift}_{between}_{writer_extra}_{reader}_{int(conditional)}_{split}_{gap}_{rows}"
    )
    sdfg.add_array("a", (N, K + 1), dace.float64)
    sdfg.add_array("G", (N, K), dace.float64)
    sdfg.add_array("H", (N, K), dace.float64)
    sdfg.add_array("T", (N, K + 1), dace.float64, transient=True)
    w = sdfg.add_state("w")
    outputs = {"__t": dace.Memlet("T[i, k]")}
    code = "__t = 2.0 * __a + 1.0"
    if writer_extra == "other_output":
        outputs["__h"] = dace.Memlet("H[i, Min(k, 5)]")
        code += "\n__h = __a"
    if writer_extra == "broadcast":
        outputs = {"__t": dace.Memlet("T[i, 0]")}
    w.add_mapped_tasklet("producer", {"i": f"0:{N}", "k": f"0:{K + 1}"}, {"__a": dace.Memlet("a[i, k]")}, code,
                         outputs, external_edges=True)  # fmt: skip
    if writer_extra == "reads_g":
        w.add_nedge(w.add_access("G"), w.add_access("H"), dace.Memlet("G[0:8, 0:6]"))
    last = w
    if between:
        mid = sdfg.add_state_after(w, "mid")
        if between == "reads_g":
            mid.add_nedge(mid.add_access("G"), mid.add_access("H"), dace.Memlet("G[0:8, 0:6]"))
        last = mid
    c = sdfg.add_state("c")
    if conditional:
        sdfg.add_symbol("flag", dace.int32)
        sdfg.add_edge(last, c, dace.InterstateEdge("flag > 0"))
        end = sdfg.add_state("end")
        sdfg.add_edge(last, end, dace.InterstateEdge("flag <= 0"))
        sdfg.add_edge(c, end, dace.InterstateEdge())
    else:
        sdfg.add_edge(last, c, dace.InterstateEdge())
    t = c.add_access("T")
    g = c.add_access("G")
    if split:  # gt4py splits the copy of a concat_where result at the branch boundary
        if rows:  # and, at a decomposed rank's halo, in rows too: rows 0:rows copied whole
            c.add_nedge(t, g, dace.Memlet(data="T", subset=f"0:{rows}, {shift}:{K + shift}",
                                          other_subset=f"0:{rows}, 0:{K}"))  # fmt: skip
        c.add_nedge(t, g, dace.Memlet(data="T", subset=f"{rows}:{N}, {shift}:{split + shift - gap}",
                                      other_subset=f"{rows}:{N}, 0:{split - gap}"))  # fmt: skip
        c.add_nedge(t, g, dace.Memlet(data="T", subset=f"{rows}:{N}, {split + shift}:{K + shift}",
                                      other_subset=f"{rows}:{N}, {split}:{K}"))  # fmt: skip
    else:
        c.add_nedge(
            t,
            g,
            dace.Memlet(
                data="T", subset=f"0:{N}, {shift}:{K + shift}", other_subset=f"0:{N}, 0:{K}"
            ),
        )
    if reader == "tasklet":
        peek = c.add_tasklet("peek", {"__t"}, {"__o"}, "__o = __t")
        c.add_edge(t, None, peek, "__t", dace.Memlet("T[0, 0]"))
        c.add_edge(peek, "__o", c.add_access("H"), None, dace.Memlet("H[0, 0]"))
    sdfg.validate()
    return sdfg


def run(sdfg, a, **symbols):
    g, h = np.zeros((N, K)), np.zeros((N, K))
    sdfg(a=a, G=g, H=h, **symbols)
    return g


def _apply(sdfg) -> int:
    return sdfg.apply_transformations_repeated(gx.WriteBackRetarget)


@pytest.mark.compile
@pytest.mark.parametrize(
    "shift, split, rows",
    [(0, 0, 0), (1, 0, 0), (1, 2, 0), (1, 2, 3)],
    ids=["same-levels", "shifted", "split-copy", "split-copy-in-two-dimensions"],
)
def test_writer_writes_the_output_and_matches_the_copy(shift, split, rows):
    sdfg = build(shift=shift, split=split, rows=rows)
    reference = copy.deepcopy(sdfg)
    assert _apply(sdfg) == 1
    assert "T" not in sdfg.arrays
    (entry,) = [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.MapEntry)]
    # restricted to the copied levels: K, not K + 1 iterations
    assert str(entry.map.range) == f"0:{N}, {shift}:{K + shift}"
    a = np.random.default_rng(1).random((N, K + 1))
    expected = 2.0 * a[:, shift : K + shift] + 1.0
    np.testing.assert_array_equal(run(sdfg, a), expected)
    np.testing.assert_array_equal(run(reference, a), expected)


def test_the_plan_names_the_restricted_range_and_the_shift():
    plan = retarget_plan(build(shift=1), "T")
    assert not isinstance(plan, Decline)
    (w,) = plan.writers
    assert [(p, str(lo), str(hi)) for p, lo, hi in w.ranges] == [("i", "0", "7"), ("k", "1", "6")]
    assert [str(s) for s in plan.shift] == ["0", "-1"]


@pytest.mark.parametrize(
    "variant, reason",
    [
        (dict(between="reads_g"), "accessed in state 'mid'"),
        (dict(writer_extra="reads_g"), "accessed in the writers' state"),
        (dict(writer_extra="other_output"), "writes other data too"),
        (dict(writer_extra="broadcast"), "own parameter"),
        (dict(reader="tasklet"), "reader besides its write-back copy"),
        (dict(conditional=True), "does not run on every path"),
        (dict(split=2, gap=1), "do not tile one box"),
        (dict(split=2, gap=1, rows=3), "copies leave [3, 7] x [2, 2] of [0, 7] x [1, 6] uncovered"),
    ],
    ids=["output-read-in-between", "output-in-writer-state", "writer-has-two-outputs", "writer-broadcasts",
         "tasklet-reads-buffer", "copy-is-conditional", "split-copies-leave-a-gap",
         "copies-split-in-two-dimensions-leave-a-gap"],
)  # fmt: skip
def test_hostile_variants_are_declined_unchanged(variant, reason):
    sdfg = build(**variant)
    before = sdfg.hash_sdfg()
    plan = retarget_plan(sdfg, "T")
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    assert _apply(sdfg) == 0
    assert gx.gt_retarget_writebacks(sdfg).writebacks_retargeted == []
    assert sdfg.hash_sdfg() == before


def test_a_map_reader_must_be_inlined_first():
    """With a Map still reading the buffer the plan holds only for the caller that
    inlines it first (`allow_map_readers`); the transformation itself declines."""
    sdfg = build()
    c = next(s for s in sdfg.states() if s.label == "c")
    t = next(n for n in c.data_nodes() if n.data == "T")
    c.add_mapped_tasklet("reader", {"i": f"0:{N}", "k": f"0:{K}"}, {"__t": dace.Memlet("T[i, k]")}, "__h = __t",
                         {"__h": dace.Memlet("H[i, k]")}, external_edges=True, input_nodes={"T": t})  # fmt: skip
    sdfg.validate()
    assert isinstance(retarget_plan(sdfg, "T"), Decline)
    assert not isinstance(retarget_plan(sdfg, "T", allow_map_readers=True), Decline)
    before = sdfg.hash_sdfg()
    assert _apply(sdfg) == 0 and sdfg.hash_sdfg() == before


def _with_reader(offsets):
    sdfg = build()
    c = next(s for s in sdfg.states() if s.label == "c")
    t = next(n for n in c.data_nodes() if n.data == "T")
    inputs = {f"__t{j}": dace.Memlet(f"T[i, k + {o}]") for j, o in enumerate(offsets)}
    c.add_mapped_tasklet("reader", {"i": f"0:{N}", "k": f"0:{K}"}, inputs, "__h = " + " - ".join(inputs),
                         {"__h": dace.Memlet("H[i, k]")}, external_edges=True, input_nodes={"T": t})  # fmt: skip
    sdfg.validate()
    return sdfg


def test_cost_model_counts_the_copy_as_no_keeper():
    """A write-back buffer with one shifted Map reader: declined before (the copy kept it,
    'stays for other readers'), now inlined as a group and the buffer retargeted."""
    sdfg = _with_reader([1])
    off = copy.deepcopy(sdfg)
    # (with outputs as buffers on, the default, `OutputAsBuffer` takes this buffer first:
    # tests/test_output_buffer.py)
    report = gx.gt_inline_intermediates(
        off, policy=gx.CostModel("cpu", writeback_retarget=False, output_buffers=False)
    )
    assert not report.applied and "stays for other readers" in report.declined[0].reason
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu", output_buffers=False))
    assert [r.consumer for r in report.applied] == [
        "reader_map"
    ] and report.writebacks_retargeted == ["T"]
    assert report.applied[0].figures["writeback_retarget"] is True
    assert two_d_transients(sdfg) == []


def test_cost_model_declines_a_write_back_group_read_at_several_offsets():
    """The producer still writes the copied points: each further offset is recomputation
    the oracle measured dearer than estimated (`writeback_max_offsets`, docs/cost_model.md)."""
    sdfg = _with_reader([1, 0])
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu", output_buffers=False))
    assert not report.applied and "read at 2 offsets" in report.declined[0].reason, report.table()
    assert report.writebacks_retargeted == [] and sdfg.hash_sdfg() == before
    report = gx.gt_inline_intermediates(
        sdfg, policy=gx.CostModel("cpu", writeback_max_offsets=2, output_buffers=False)
    )
    assert report.writebacks_retargeted == ["T"] and two_d_transients(sdfg) == []
