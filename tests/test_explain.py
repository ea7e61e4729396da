"""`gt4py-dace-xforms explain MODULE:PROGRAM`: lowered without compiling, every temporary
the stock backend keeps and what the library does with it; bad input is one line, exit 2."""

import dace
import pytest

from gt4py_dace_xforms.cli.main import main
from gt4py_dace_xforms.tools.explain import explain


@pytest.fixture(scope="module")
def shifted_sum():
    return explain("user_programs:shifted_sum")


def test_user_program_temporary_removed(shifted_sum):
    # `t = a * 2.0 + b; return t + t(K + 1)`: stock keeps `t`; read at two levels, the CPU
    # model (per-call transients, fresh pages) inlines it: two copies, cheap.
    assert shifted_sum.counts["post_stock"] == 1 and shifted_sum.counts["post_library"] == 0
    assert shifted_sum.counts["final_stock"] == 1 and shifted_sum.counts["final_library"] == 0
    (tmp,) = shifted_sum.temporaries
    assert tmp.stock and not tmp.library and tmp.status == "removed"
    assert tmp.why.startswith("inlined into map_"), tmp.why
    text = shifted_sum.text()
    assert f"{tmp.name}  removed  inlined into" in text
    assert "cost model (cpu):" in text and "inline; saves" in text


def test_before_after_sdfgs_for_the_viewer(shifted_sum, tmp_path):
    import gt4py_dace_xforms  # noqa: F401  # registers InlineFuser
    from gt4py_dace_xforms.tools.explain import write_sdfgs

    before, after = write_sdfgs(shifted_sum, str(tmp_path / "shifted_sum"))
    assert before.endswith("shifted_sum.before.sdfg") and after.endswith("shifted_sum.after.sdfg")
    tmp = shifted_sum.temporaries[0].name
    assert tmp in dace.SDFG.from_file(before).arrays
    assert tmp not in dace.SDFG.from_file(after).arrays


def test_cli_explain_user_program(capsys, tmp_path):
    assert main(["explain", "user_programs:shifted_sum", "--sdfg-out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "two-dimensional temporaries after gt4py's top-level stage: stock 1, library 0" in out
    assert (tmp_path / "s.before.sdfg").is_file() and (tmp_path / "s.after.sdfg").is_file()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["user_programs:_shifted_sum"], "not a gt4py program but a field operator"),
        (["user_programs:nothing"], "module has no attribute 'nothing'"),
        (["no_such_module_xyz:prog"], "no_such_module_xyz: cannot import"),
        (["user_programs"], "expected MODULE:PROGRAM"),
        (["user_programs:edge_sum"], "uses neighbor offsets ['C2E']: give a grid"),
        (
            ["user_programs:edge_sum", "--offset-provider", "user_programs:EMPTY_GRID"],
            "no connectivity for offsets ['C2E']",
        ),
        (
            ["user_programs:edge_sum", "--offset-provider", "user_programs:nothing"],
            "has no attribute 'nothing'",
        ),
        (
            ["user_programs:edge_sum", "--offset-provider", "nogrid"],
            "expected 'simple' or MODULE:NAME",
        ),
        (
            ["user_program_with_type_error:wrong_args"],
            "importing it fails (DSLError: Invalid call to '_twice'.)",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, expected):
    assert main(["explain", *argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("gt4py-dace-xforms: error:") and "\n" not in err and expected in err, err
    assert captured.out == ""


@pytest.mark.parametrize("grid", ["user_programs:ring_grid", "simple"])
def test_grid_is_used_when_given(capsys, grid):
    # The same program with a grid (a function returning the tables, or icon4py's test
    # grid): lowered; a neighbor sum written straight to the output leaves no temporary.
    if grid == "simple":
        pytest.importorskip(
            "icon4py.model.common.grid.simple", exc_type=ImportError
        )  # needs serialbox4py
    assert main(["explain", "user_programs:edge_sum", "--offset-provider", grid]) == 0
    out = capsys.readouterr().out
    assert "(cpu, offsets C2E)" in out
    assert "stock 0, library 0" in out and "keeps no two-dimensional temporary" in out


def test_cost_lines_show_group_figures():
    from gt4py_dace_xforms.report import InlineRecord, InlineReport

    fig = {
        "saved_bytes": 51200.0,
        "extra_load_bytes": 153600.0,
        "extra_work_bytes": 20800.0,
        "copies": 1,
        "ops_per_copy": 13.0,
        "assumed": ["nlev"],
    }
    single = InlineRecord("s", "t", "m", (("0", "0"),), False, "no gain", figures=fig)
    grouped = InlineRecord(
        "s",
        "t",
        "n",
        (("0", "0"),),
        True,
        "gain",
        figures=dict(fig, group_size=3, group_saved_bytes=3.1e5, group_extra_work_bytes=4e4),
    )
    lines = InlineReport([single, grouped]).cost_lines()
    assert lines[0] == (
        "  t -> m: keep; saves 5.12e+04 B, extra loads 1.54e+05 B, extra work 2.08e+04 B "
        "(1 copies x 13 ops); assumed nlev"
    )
    assert (
        "t -> n: inline; " in lines[1]
        and "; with all 3 readers: saves 3.1e+05 B, extra work 4e+04 B; " in lines[1]
    )


def test_cost_lines_of_a_sweep_pair_and_of_an_unknown_record():
    # (explain --static of a solver crashed with KeyError 'saved_bytes' on the sweep pair's record.)
    from gt4py_dace_xforms.report import InlineRecord, InlineReport

    pair = InlineRecord(
        "s",
        "gtir_tmp_148",
        "map_1",
        (),
        True,
        "sweep pair",
        figures={
            "sweep_pair_saved_bytes": 2.6e7,
            "sweep_pair_column_bytes": 640.0,
            "target": "cpu",
        },
        mode="sweep_pair",
    )
    other = InlineRecord(
        "s", "x", "m", (), False, "?", figures={"something_new": 3.0, "target": "gpu"}
    )
    gpu = InlineRecord(
        "s",
        "gtir_tmp_154",
        "map_1",
        (),
        False,
        "sweep pair on the GPU",
        figures={
            "sweep_pair_saved_bytes": 2.6e7,
            "sweep_pair_column_bytes": 1280.0,
            "target": "gpu",
            "gpu_columns": 40000.0,
            "gpu_threads_per_sm": 320,
            "gpu_column_bytes_per_sm": 320 * 1280.0,
            "gpu_l1_bytes": 262144,
        },
    )
    lines = InlineReport([pair, other, gpu]).cost_lines()
    assert lines == [
        "  gtir_tmp_148 -> map_1: column buffer; saves 2.6e+07 B, a column of 640 B per iteration, "
        "recomputes nothing",
        "  x -> m: keep; something_new 3, target gpu",
        "  gtir_tmp_154 -> map_1: keep; saves 2.6e+07 B, a column of 1.28e+03 B per iteration; on the "
        "GPU a local array per thread, 320 threads per SM hold 400 of the L1's 256 KiB, recomputes nothing",
    ]


def test_explain_shows_the_stock_crash_and_the_library_taking_the_node():
    expl = explain("user_programs:cell_only_branch")
    assert expl.stock_error.startswith("IndexError"), expl.stock_error
    assert expl.counts["post_library"] == 0 and expl.counts["final_library"] == 0
    assert [(r.applied, r.removed_intermediate) for r in expl.report.records] == [(True, True)]
    assert "stock backend FAILS: IndexError" in expl.text()


def test_a_retargeted_temporary_says_so():
    from gt4py_dace_xforms.report import InlineRecord
    from gt4py_dace_xforms.tools.explain import Temporary

    rec = InlineRecord("s", "gtir_tmp_49", "map_55_fieldop", (("0", "0"),), True, "gain")
    tmp = Temporary("gtir_tmp_49", True, False, [rec], retargeted=True)
    assert (
        tmp.why
        == "inlined into map_55_fieldop; its writers write the output it was copied into (retargeted)"
    )
    assert Temporary("gtir_tmp_49", True, False, [rec]).why == "inlined into map_55_fieldop"


def test_a_piece_gt4py_split_off_after_the_pass_shows_the_decisions_about_its_array():
    from gt4py_dace_xforms.report import InlineRecord
    from gt4py_dace_xforms.tools.explain import Temporary, _records_of

    rec = InlineRecord("s", "gtir_tmp_206", "map_65_fieldop_1", (("0", "0"),), True, "gain")
    by_name = {"gtir_tmp_206": [rec]}
    assert _records_of("gtir_tmp_206_split_1", by_name) == [rec]
    assert _records_of("gtir_tmp_206_split_x", by_name) == []
    assert Temporary(
        "gtir_tmp_206_split_1", True, False, _records_of("gtir_tmp_206_split_1", by_name)
    ).why == ("inlined into map_65_fieldop_1")
