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
    """The fixture's read at k and k+1 recomputes: declined for a run with persistent transients."""
    assert (
        main(
            ["optimize", str(sdfg_file), "-o", str(tmp_path / "o.sdfg"), "--persistent-transients"]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "2-D transients: 1 before, 1 after" in text and "persistent_transients" in text


def test_all_sound_skips_the_cost_model(sdfg_file, tmp_path, capsys):
    assert main(["optimize", str(sdfg_file), "-o", str(tmp_path / "o.sdfg"), "--all-sound"]) == 0
    text = capsys.readouterr().out
    assert "inlined copies: 2" in text and "cost model" not in text
