"""The command line: optimize a fixture, and one-line errors (exit 2) for bad input."""

import json
import os

import pytest
from builders import producer_consumer

from gt4py_dace_xforms.cli.main import main


@pytest.fixture
def sdfg_file(tmp_path):
    sdfg = producer_consumer(
        "cli_input",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-1"},
        write="i, k",
        reads=["i, k", "i, k + 1"],
    )
    path = tmp_path / "in.sdfg"
    sdfg.save(str(path))
    return path


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert err.startswith("gt4py-dace-xforms: error:")
    assert "\n" not in err and "Traceback" not in err
    return err


def test_optimize_writes_output_and_report(sdfg_file, tmp_path, capsys):
    before = sdfg_file.read_bytes()
    out, rep = tmp_path / "out.sdfg", tmp_path / "report.json"
    assert main(["optimize", str(sdfg_file), "-o", str(out), "--report", str(rep)]) == 0
    text = capsys.readouterr().out
    assert "2-D transients: 1 before, 0 after" in text
    # read at k and k+1: the CPU model inlines it (two copies); windows are off by default
    assert "inlined copies: 2 (1 reads applied, 0 declined); windowed: 0" in text
    assert sdfg_file.read_bytes() == before
    import dace

    assert "tmp" not in dace.SDFG.from_file(str(out)).arrays
    records = json.loads(rep.read_text())
    assert (
        records[0]["applied"]
        and records[0]["intermediate"] == "tmp"
        and records[0]["mode"] != "window"
    )


def test_optimize_with_windows_sweeps(sdfg_file, tmp_path, capsys):
    out = tmp_path / "out.sdfg"
    assert main(["optimize", str(sdfg_file), "-o", str(out), "--windows"]) == 0
    text = capsys.readouterr().out
    assert "2-D transients: 1 before, 0 after" in text
    # read at k and k+1, with per-call transients: the CPU model sweeps it in K
    assert "inlined copies: 0 (0 reads applied, 0 declined); windowed: 1" in text
    # the old flag is the default now, still accepted
    assert main(["optimize", str(sdfg_file), "-o", str(out), "--no-windows"]) == 0


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b'{"type": "SDFG", "nodes": [', "not a readable SDFG"),
        (b'{"hello": 1}', "not a readable SDFG"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.sdfg"
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "out.sdfg"
    assert main(["optimize", str(path), "-o", str(out)]) == 2
    assert expected in _one_line_error(capsys)
    assert not out.exists()
    if content is not None:
        assert path.read_bytes() == content


def test_invalid_sdfg_is_rejected(tmp_path, capsys):
    import dace

    sdfg = dace.SDFG("invalid")
    sdfg.add_array("a", [4], dace.float64)
    st = sdfg.add_state()
    st.add_edge(
        st.add_access("a"), None, st.add_tasklet("t", {"x"}, {}, "pass"), "x", dace.Memlet("a[7]")
    )
    path = tmp_path / "invalid.sdfg"
    sdfg.save(str(path))
    before = path.read_bytes()
    assert main(["optimize", str(path), "-o", str(tmp_path / "o.sdfg")]) == 2
    assert "invalid SDFG" in _one_line_error(capsys)
    assert path.read_bytes() == before


def test_output_equal_to_input_is_refused(sdfg_file, capsys):
    before = sdfg_file.read_bytes()
    assert main(["optimize", str(sdfg_file), "-o", str(sdfg_file)]) == 2
    assert "refusing to overwrite" in _one_line_error(capsys)
    assert sdfg_file.read_bytes() == before


def test_unwritable_output_is_refused(sdfg_file, tmp_path, capsys):
    assert main(["optimize", str(sdfg_file), "-o", str(tmp_path / "missing" / "o.sdfg")]) == 2
    assert "does not exist" in _one_line_error(capsys)
    assert main(["optimize", str(sdfg_file), "-o", str(tmp_path)]) == 2
    assert "is a directory" in _one_line_error(capsys)
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores permission bits
            pytest.skip("running as a user that can write anywhere")
        assert main(["optimize", str(sdfg_file), "-o", str(ro / "o.sdfg")]) == 2
        assert "not writable" in _one_line_error(capsys)
    finally:
        os.chmod(ro, 0o700)


def test_optimize_with_cost_model_prints_decisions(sdfg_file, tmp_path, capsys):
    assert (
        main(["optimize", str(sdfg_file), "-o", str(tmp_path / "o.sdfg"), "--target", "gpu"]) == 0
    )
    text = capsys.readouterr().out
    assert "cost model (gpu):" in text and "tmp -> consumer_map: inline; saves" in text


def test_persistent_transients_decline_recomputation(sdfg_file, tmp_path, capsys):
    """The fixture's read at k and k+1 recomputes: declined for a run with persistent
    transients (gt4py's spelling, any case)."""
    out = str(tmp_path / "o.sdfg")
    assert (
        main(["optimize", str(sdfg_file), "-o", out, "--transient-memory-mode", "persistent"]) == 0
    )
    text = capsys.readouterr().out
    assert "2-D transients: 1 before, 1 after" in text
    assert "transient_memory_mode=PERSISTENT" in text


def test_transient_memory_modes_are_gt4pys():
    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        TransientMemoryMode,
    )

    from gt4py_dace_xforms.cli.main import TRANSIENT_MEMORY_MODES

    assert set(TRANSIENT_MEMORY_MODES) == {m.value for m in TransientMemoryMode}


def test_optimize_runs_the_hooks_pipeline(sdfg_file, tmp_path, capsys):
    """`optimize` leaves the SDFG `hooks.run_hooks` leaves (what `gt_auto_optimize` gets from
    the library's hooks), and says so."""
    import dace

    from gt4py_dace_xforms.integration.hooks import run_hooks

    out = tmp_path / "o.sdfg"
    assert main(["optimize", str(sdfg_file), "-o", str(out)]) == 0
    assert "(the hooks' pipeline)" in capsys.readouterr().out
    expected = dace.SDFG.from_file(str(sdfg_file))
    report = run_hooks(expected)
    assert report.copies == 2
    got = dace.SDFG.from_file(str(out))
    assert sorted(got.arrays) == sorted(expected.arrays)
    assert [type(n).__name__ for n, _ in got.all_nodes_recursive()] == [
        type(n).__name__ for n, _ in expected.all_nodes_recursive()
    ]


@pytest.mark.parametrize("name", ["inline", "windows", "copy-chains", "split-hazards"])
def test_only_pass_runs_one_pass(sdfg_file, tmp_path, capsys, name):
    out = tmp_path / "o.sdfg"
    assert main(["optimize", str(sdfg_file), "-o", str(out), "--only-pass", name]) == 0
    text = capsys.readouterr().out
    assert f"(--only-pass {name})" in text
    # only the inlining pass removes the fixture's intermediate (the windows are off)
    left = "0 after" if name == "inline" else "1 after"
    assert f"2-D transients: 1 before, {left}" in text


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--all-sound", "--target", "gpu"], "--target sets the cost model"),
        (["--all-sound", "--transient-memory-mode", "PERSISTENT"], "--transient-memory-mode"),
        (["--all-sound", "--windows"], "--windows sets the cost model"),
        (["--windows", "--no-windows"], "contradict"),
        (["--only-pass", "copy-chains", "--target", "gpu"], "consults no policy"),
        (["--only-pass", "sweep-pairs", "--windows"], "--windows applies to"),
        (["--transient-memory-mode", "NONE"], "invalid choice"),
        (["--persistent-transients"], "unrecognized arguments"),
    ],
)
def test_conflicting_optimize_flags_are_refused(sdfg_file, tmp_path, capsys, argv, expected):
    out = tmp_path / "o.sdfg"
    assert main(["optimize", str(sdfg_file), "-o", str(out), *argv]) == 2
    assert expected in _one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["census", "m:p", "--compare", "--eager"], "separate runs"),
        (["census", "m:p", "--cells", "8"], "--cells only applies to --compare"),
        (["census", "m:p", "--final", "--no-transients"], "--no-transients skips"),
        (["census", "m:p", "--eager", "--final"], "--final applies to the census itself"),
        (["census", "m:p", "--concat-only"], "--concat-only"),
        (["census", "m:p", "--layout", "lam"], "pass --static too"),
        (["census", "m:p", "--jobs", "0"], "--jobs"),
        (["explain", "m:p", "--layout", "lam"], "pass --static too"),
        (["traffic", "--target", "gpu", "--fresh-page-bytes", "0"], "not with --target gpu"),
    ],
)
def test_conflicting_flags_of_other_commands_are_refused(capsys, argv, expected):
    """Refused before any program is loaded: one line, exit status 2."""
    assert main(argv) == 2
    assert expected in _one_line_error(capsys)


def test_static_defaults_to_the_layout_of_traffic_and_demo():
    from gt4py_dace_xforms.cli.main import _static_layout, build_parser
    from gt4py_dace_xforms.tools.layouts import DEFAULT_LAYOUT

    parser = build_parser()
    assert parser.parse_args(["traffic"]).layout == DEFAULT_LAYOUT
    for argv in (["explain", "m:p", "--static"], ["census", "m:p", "--static"]):
        assert _static_layout(parser.parse_args(argv)) == DEFAULT_LAYOUT
    assert _static_layout(parser.parse_args(["explain", "m:p"])) is None
    args = parser.parse_args(["explain", "m:p", "--static", "--layout", "global"])
    assert _static_layout(args) == "global"


def test_all_sound_skips_the_cost_model(sdfg_file, tmp_path, capsys):
    assert main(["optimize", str(sdfg_file), "-o", str(tmp_path / "o.sdfg"), "--all-sound"]) == 0
    text = capsys.readouterr().out
    assert "inlined copies: 2" in text and "cost model" not in text
