"""The census: program discovery, grids, the per-program counts, and the CLI (no compilation)."""

import json
import re

import gt4py.next as gtx
import pytest

from gt4py_dace_xforms.cli.main import main
from gt4py_dace_xforms.tools import census, determinism, programs


SEED = "gt4py_dace_xforms.cli.demo:vertical_difference_computed_program"
THREE_LEVEL = "gt4py_dace_xforms.cli.demo:three_level_sum_program"

Vertex = gtx.Dimension("Vertex")
Edge = gtx.Dimension("Edge")
E2VDim = gtx.Dimension("E2V", kind=gtx.DimensionKind.LOCAL)
E2V = gtx.FieldOffset("E2V", source=Vertex, target=(Edge, E2VDim))


@gtx.field_operator
def _edge_sum(
    v: gtx.Field[gtx.Dims[Vertex], gtx.float64],
) -> gtx.Field[gtx.Dims[Edge], gtx.float64]:
    return v(E2V[0]) + v(E2V[1])


@gtx.program
def edge_sum(
    v: gtx.Field[gtx.Dims[Vertex], gtx.float64], out: gtx.Field[gtx.Dims[Edge], gtx.float64]
):
    _edge_sum(v, out=out)


def test_load_program_errors_are_one_line():
    with pytest.raises(ValueError, match="cannot import"):
        programs.load_program("no_such_module_xyz:p")
    with pytest.raises(ValueError, match="no attribute"):
        programs.load_program("gt4py_dace_xforms.cli.demo:nope")
    with pytest.raises(ValueError, match="field operator"):
        programs.load_program("gt4py_dace_xforms.cli.demo:vertical_difference")
    with pytest.raises(ValueError, match="MODULE:PROGRAM"):
        programs.load_program("gt4py_dace_xforms.cli.demo")


def test_discover_finds_programs_defined_in_a_module_and_their_features():
    refs = programs.discover(["gt4py_dace_xforms.cli.demo"])
    names = {r.name for r in refs}
    assert {
        "vertical_difference_program",
        "vertical_difference_computed_program",
        "three_level_sum_program",
    } <= names
    assert programs.features(programs.load_program(SEED)) == {
        "concat_where": True,
        "vertical_shift": True,
    }
    assert programs.features(programs.load_program(THREE_LEVEL)) == {
        "concat_where": False,
        "vertical_shift": True,
    }
    assert programs.features(edge_sum) == {"concat_where": False, "vertical_shift": False}
    assert programs.discover(["no_such_package_xyz"]) == []


def test_offset_provider_built_from_the_programs_own_offsets():
    provider = programs.offset_provider_for(edge_sum)
    assert list(provider) == ["E2V"]
    table = provider["E2V"].asnumpy()
    assert table.shape == (programs.SMALL_GRID["Edge"], programs.ICOSAHEDRAL_NEIGHBORS["E2V"])
    assert table.min() >= 0 and table.max() < programs.SMALL_GRID["Vertex"]
    assert programs.offset_provider_for(programs.load_program(SEED)) == {}


def test_offset_provider_from_a_grid_names_what_is_missing():
    with pytest.raises(ValueError, match=r"no connectivity for offsets \['E2V'\]"):
        programs.offset_provider_for(edge_sum, grid={"C2E": object()})
    sentinel = object()
    assert programs.offset_provider_for(edge_sum, grid={"E2V": sentinel}) == {"E2V": sentinel}


def test_reason_class_abstracts_names_and_numbers():
    a = census.reason_class("producer reads 'x' through two AccessNodes")
    b = census.reason_class("producer reads 'y_12' through two AccessNodes")
    assert a == b == "producer reads X through two AccessNodes"
    assert census.reason_class(
        "concat regions cannot be proven to cover the read [0, n - 1] in dimension 1"
    ) == ("concat regions cannot be proven to cover the read [..] in dimension N")
    assert census.reason_class("analysis failed: KeyError: 'abc'") == "analysis failed"


@pytest.fixture(scope="module")
def seed_census():
    return census.census_program(programs.ProgramRef(*SEED.split(":")), final=True)


def test_census_of_the_seed_program_counts_what_the_pass_does(seed_census):
    r = seed_census
    assert r.error is None
    # One concat node read at k and k+1 by one Map: one candidate, sound, applied by both policies.
    assert (r.candidates, r.sound, r.applied_sound, r.applied_model) == (1, 1, 1, 1)
    assert r.declines == {}
    assert r.transients_stock == 1 and r.transients_model == 0 and r.transients_sound == 0
    assert 0 <= r.final_model <= r.final_stock


def test_census_table_and_json_sum_over_programs(seed_census):
    broken = census.ProgramCensus("m:broken", error="ValueError: no")
    results = [seed_census, broken]
    text = census.table(results)
    assert "vertical_difference_computed_program" in text and re.search(
        r"broken +error: ValueError: no", text
    )
    data = json.loads(census.to_json(results))
    assert data["total"]["candidates"] == 1 and data["total"]["transients_stock"] == 1
    assert [p["program"] for p in data["programs"]] == [SEED, "m:broken"]


def test_census_records_a_failure_instead_of_raising():
    r = census.census_program(programs.ProgramRef("gt4py_dace_xforms.cli.demo", "nope"))
    assert r.error and "no attribute" in r.error


def test_cli_census_bad_program_is_one_line_error(capsys):
    assert main(["census", "no_such_module_xyz:prog"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gt4py-dace-xforms: error:") and "\n" not in err


def test_cli_census_exact_without_compare_is_one_line_error(capsys):
    # --exact changes how builds compile; without --compare nothing compiles.
    assert main(["census", THREE_LEVEL, "--exact"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("gt4py-dace-xforms: error:") and "--exact only applies to --compare" in err
    )
    assert "\n" not in err


def test_cli_census_writes_json(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["census", THREE_LEVEL, "--no-transients", "--json", str(out)]) == 0
    assert "three_level_sum_program" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["programs"][0]["candidates"] >= 1 and data["programs"][0]["applied_sound"] >= 1


def test_census_lists_the_arrays_gt4py_accesses_in_an_undefined_order(seed_census):
    """issue 32's program (tests/test_races.py): `t_out` written twice in one state, unordered."""
    racy = census.census_program(
        programs.ProgramRef("test_races", "written_read_overwritten"), transients=False
    )
    assert racy.error is None and [x.split("@")[0] for x in racy.racy] == ["t_out"], racy.racy
    assert seed_census.racy == []
    text = census.table([seed_census, racy])
    assert "written_read_overwritten:t_out@" in text


def test_determinism_verdict_needs_equal_hashes():
    same = determinism.ProgramDeterminism("m:p", hashes={0: "ab", 12345: "ab"})
    other = determinism.ProgramDeterminism("m:q", hashes={0: "ab", 12345: "cd"})
    assert same.deterministic and not other.deterministic
    assert "NO: seed 0 ab, seed 12345 cd" in determinism.table([same, other])
    assert "1 of 2 programs" in determinism.table([same, other])


def test_cli_census_determinism_bad_program_is_an_error(capsys):
    # A program that cannot be loaded: the subprocess's error comes back as the verdict.
    r = determinism.check_program(programs.ProgramRef("gt4py_dace_xforms.cli.demo", "nope"))
    assert not r.deterministic and r.error.startswith("PYTHONHASHSEED=0:")
    assert main(["census", THREE_LEVEL, "--determinism", "--eager"]) == 2
    assert "separate runs" in capsys.readouterr().err


@pytest.mark.icon4py
def test_an_icon4py_program_lowers_to_the_same_sdfg_under_two_hash_seeds(capsys):
    """issue 32: gt4py's build cache and MPI ranks need the library's output deterministic.
    `compute_ddqz_z_half` folds copy chains (10 temporaries stock, 2 with the library)."""
    spec = "icon4py.model.common.metrics.metric_fields:compute_ddqz_z_half"
    assert main(["census", spec, "--determinism"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 programs give the same SDFG" in out
