"""Per concat node: is eager evaluation proven sound, and if not, which access is not (no compilation)."""

import json

import dace
import fixture_lib
import gt4py.next as gtx
import neighbor_programs as nb
import numpy as np
import test_concat_gt4py as programs
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from sympy import Max

from gt4py_dace_xforms.analysis import annotations
from gt4py_dace_xforms.analysis.concat import find_witness
from gt4py_dace_xforms.integration.lowering import KEY, record_annotations
from gt4py_dace_xforms.measure.poison import poison_unread
from gt4py_dace_xforms.tools import eager


Cell, K, F64 = programs.Cell, programs.K, programs.F64


def _step(program, args, offset_provider=None):
    with record_annotations():
        return fixture_lib.lower_and_capture(
            program, args, offset_provider or {}, GT4PyAutoOptHook.TopLevelDataFlowStep
        )


def test_the_provable_program_is_eager_for_every_concat_node():
    a = programs.field()
    rows = eager.eager_rows(_step(programs.eager_provable_program, [a, a, a]))
    assert rows and {r.verdict for r in rows} == {eager.EAGER}, eager.table(
        [eager.ProgramEager("p", rows)]
    )


def test_a_branch_reading_below_what_the_program_reads_is_named_with_its_access():
    # `interior` is read at k >= 1 only; evaluated eagerly at k = 0 it would read level 0.
    a = programs.field()
    rows = eager.eager_rows(_step(programs.exact_inputs_program, [a, a, a]))
    (row,) = [r for r in rows if r.verdict != eager.NO_READER]
    assert row.verdict == eager.OUTSIDE, row
    assert "interior[dim 1]" in row.access and "low end not proven" in row.needed
    assert (
        row.annotated.startswith("K: [1, ") and row.selected
    )  # what the program reads, where it is selected
    assert (
        row.inferred == "[1, 12)"
    )  # domain inference: theta(K + 1) reads levels 1..11 of `interior`
    # Not merely unproven: a field passed from level 1 on (what the program reads) is read at level 0.
    assert row.witness == "__interior_K_range_0=1", row.witness


def test_a_witness_satisfies_the_facts_and_breaks_the_bound():
    n, lo, origin = (dace.symbolic.symbol(x) for x in ("n", "lo", "origin"))
    facts = [
        n - 1,
        lo - origin,
        Max(1, lo) - lo,
    ]  # the read runs; the field starts at or below `lo`
    found = find_witness(lo - 1 - origin, facts)  # reading one below `lo`
    values = {dace.symbolic.symbol(k): v for k, v in found.items()}
    assert (lo - 1 - origin).subs(values) < 0 and all(f.subs(values) >= 0 for f in facts), found
    assert find_witness(lo - origin, facts) is None  # holds whenever the facts do


@gtx.field_operator
def _two_outputs(a: F64, b: F64) -> tuple[F64, F64]:
    theta = concat_where(K < 1, b * 2.0, a + 1.0)
    return theta(K + 1) - theta + a + b(K + 1), a * b


@gtx.program
def two_outputs_program(a: F64, b: F64, out0: F64, out1: F64):
    _two_outputs(a, b, out=(out0, out1), domain={Cell: (0, 16), K: (0, 11)})


def test_a_tuple_target_still_annotates_its_fields_and_proves_eager():
    # gt4py writes both outputs with one statement whose domain is a tuple; domain inference
    # takes it per element, so `a` and `b` are annotated as in the single-output program.
    a = programs.field()
    sdfg = _step(two_outputs_program, [a, a, a, a])
    for name in ("a", "b"):
        ann = annotations.read(sdfg.arrays[name])
        assert ann and ann["kind"] == "field" and all(ann["covers"]), (name, ann)
    assert {r.verdict for r in eager.eager_rows(sdfg)} == {eager.EAGER}


def test_a_neighbor_read_does_not_drop_the_fields_annotation():
    # Lowering has the table's type only, and domain inference cannot translate a shift
    # through E2C without its contents: the statement used to be skipped, leaving `a`
    # unannotated. Its K range is read directly and is known.
    args, provider = nb.inputs()
    sdfg = _step(
        nb.edge_difference_and_shift, [args["a"], args["b"], args["out"], np.int32(6)], provider
    )
    ann = annotations.read(sdfg.arrays["a"])
    assert ann and ann["dims"] == ["Cell", "K"] and ann["covers"][1] == ["0", "nlev"], ann


def test_a_concat_annotation_matches_its_node_after_saving_to_a_file(tmp_path):
    # A loaded SDFG may spell `Max(0, end - start)` with its sum's terms in another order;
    # it is still the shape the annotation was made for.
    sdfg = dace.SDFG("saved")
    shape = dace.symbolic.pystr_to_symbolic("Max(0, horizontal_end - horizontal_start)")
    sdfg.add_array("t", [shape, 3], dace.float64, transient=True)
    sdfg.arrays["t"].location[KEY] = json.dumps(
        {"kind": "concat", "dim": 1, "shape": [str(shape), "3"], "branches": []}
    )
    sdfg.save(str(tmp_path / "t.sdfg"))
    assert (
        annotations.concat_annotation(dace.SDFG.from_file(str(tmp_path / "t.sdfg")), "t")
        is not None
    )


def test_poisoned_inputs_hold_nan_exactly_where_the_program_does_not_read():
    a = programs.field()
    sdfg = _step(programs.runtime_boundary_program, [a, a, a, np.int32(9), np.int32(0)])
    args = dict(
        a=programs.field(),
        b=programs.field(),
        out=programs.field(),
        surface_level=np.int32(9),
        start=np.int32(3),
    )
    poisoned = poison_unread(sdfg, args)
    # Domain {Cell: (2, 16), K: (start, 11)}, theta(K + 1) - theta with theta =
    # concat_where(K < surface_level - 1, a * 0.5, b - 1.0): theta is needed on levels 3..11,
    # from `a` below level 8 and from `b` above; the rest of each is poison.
    for name, levels in (("a", slice(3, 8)), ("b", slice(8, 12))):
        got = np.isnan(poisoned[name].asnumpy())
        want = np.ones(got.shape, dtype=bool)
        want[2:16, levels] = False
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert not np.isnan(
        poisoned["out"].asnumpy()
    ).any()  # written only: nothing known, nothing poisoned


def test_cli_census_eager_prints_one_row_per_concat_node_and_writes_json(tmp_path, capsys):
    from gt4py_dace_xforms.cli.main import main

    out = tmp_path / "e.json"
    assert (
        main(
            [
                "census",
                "gt4py_dace_xforms.cli.demo:vertical_difference_computed_program",
                "--eager",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    rows = data["programs"][0]["rows"]
    assert rows and all(r["verdict"] in text for r in rows)
    assert (
        sum(data["total"].values()) == len(rows)
        and f"concat nodes: {len(rows)} in 1 programs" in text
    )
