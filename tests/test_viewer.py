"""The DaCe VS Code viewer's route: list the matches (`SDFGOptimizer.get_pattern_matches`,
what the extension's backend calls), serialize the clicked one, rebuild it, `apply_pattern`,
list again. Clicked from the top of the list (or from the bottom), InlineFuser ends where
`gt_inline_intermediates` ends."""

import copy

import dace
import pytest
from dace.transformation.optimizer import SDFGOptimizer

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.tools.compare import two_d_transients


def _listed(sdfg):
    return [
        m
        for m in SDFGOptimizer(sdfg).get_pattern_matches()
        if isinstance(m, (gx.InlineFuser, gx.WriteBackToMap, gx.WriteBackRetarget))
    ]


def click_through(sdfg, pick: int) -> list[str]:
    """Apply the listed InlineFuser, WriteBackToMap or WriteBackRetarget match at position
    `pick` (0: top, -1: bottom) until none is left, as the viewer does; returns the
    intermediates (`writeback:T` for a converted copy, `retarget:T` for a retargeted
    buffer), in click order."""
    clicked = []
    while matches := _listed(sdfg):
        match = matches[pick]
        if isinstance(match, gx.InlineFuser):
            clicked.append(match.intermediate.data)
        else:
            kind = "writeback" if isinstance(match, gx.WriteBackToMap) else "retarget"
            clicked.append(f"{kind}:{match.source.data}")
        rebuilt = dace.serialize.from_json(match.to_json())
        rebuilt._sdfg = sdfg
        rebuilt.apply_pattern()
        sdfg.validate()
        assert len(clicked) < 50, clicked
    return clicked


@pytest.fixture(scope="module")
def multi_offset(root):
    # `t = a * 2 + b; t + t(K+1) + t(K+2)` at gt4py's TopLevelDataFlowPre: a chain of
    # unfused Maps, `gtir_tmp_2 -> gtir_tmp_4 -> ... -> gtir_tmp_8`.
    return dace.SDFG.from_file(str(root / "sdfg_fixtures" / "seed_multi_offset.sdfg"))


@pytest.mark.parametrize("pick", [0, -1], ids=["top-first", "bottom-first"])
@pytest.mark.parametrize("fixture", ["seed_multi_offset", "seed_vertical_difference"])
def test_click_through_reaches_the_pass(root, fixture, pick):
    sdfg = dace.SDFG.from_file(str(root / "sdfg_fixtures" / f"{fixture}.sdfg"))
    by_pass = copy.deepcopy(sdfg)
    gx.gt_inline_intermediates(by_pass, policy=gx.InlineWhereSound())
    clicked = click_through(sdfg, pick)
    assert clicked
    assert two_d_transients(sdfg) == two_d_transients(by_pass)


def test_upstream_match_is_listed_before_its_downstream_one(multi_offset):
    sdfg = copy.deepcopy(multi_offset)
    clicked = click_through(sdfg, 0)
    # The first intermediate of the chain is clicked before the one its producer feeds.
    assert clicked.index("gtir_tmp_2") < clicked.index("gtir_tmp_8"), clicked
    # the last one, copied into the output, is retargeted once its Map reader is inlined,
    # as docs/writeback.md says
    assert two_d_transients(sdfg) == [] and any(c.startswith("retarget:") for c in clicked), clicked


def test_downstream_first_nests_the_upstream_copy(multi_offset):
    """With `upstream_first` off, the downstream match is listed right away. Applied first,
    its copy receives the upstream intermediate whole and reads elements of it: a nested
    read (`analysis.nested_reads`), so clicking on still removes it, one nesting level
    deeper than in the upstream-first order (which this test once showed stuck at two)."""
    sdfg = copy.deepcopy(multi_offset)
    pending = [m for m in _listed(sdfg) if isinstance(m, gx.InlineFuser)]
    assert pending and all(m.intermediate.data != "gtir_tmp_8" for m in pending)
    state = sdfg.states()[0]
    t8 = next(n for n in state.data_nodes() if n.data == "gtir_tmp_8")
    consumer = state.out_edges(t8)[0].dst
    eager = gx.InlineFuser()
    eager.upstream_first = False
    eager.setup_match(
        sdfg,
        sdfg.cfg_id,
        sdfg.node_id(state),
        {
            gx.InlineFuser.producer_exit: state.node_id(state.in_edges(t8)[0].src),
            gx.InlineFuser.intermediate: state.node_id(t8),
            gx.InlineFuser.consumer_entry: state.node_id(consumer),
        },
        0,
    )
    guarded = copy.copy(eager)
    guarded.upstream_first = True
    assert not guarded.can_be_applied(state, 0, sdfg)  # declined while upstream is pending
    assert eager.can_be_applied(state, 0, sdfg)
    eager.apply(state, sdfg)
    clicked = click_through(sdfg, 0)
    assert "gtir_tmp_2" in clicked, clicked
    assert two_d_transients(sdfg) == []


def test_custom_transformations_file_registers_the_fuser(root, tmp_path):
    """The file the docs point the extension's custom-transformations setting at: loaded by
    path in a fresh interpreter (where nothing imported the package), it makes DaCe list
    InlineFuser on the seed fixture."""
    import subprocess
    import sys

    script = tmp_path / "load.py"
    script.write_text(
        "import importlib.util, sys, dace\n"
        "from dace.transformation.optimizer import SDFGOptimizer\n"
        "assert 'gt4py_dace_xforms' not in sys.modules\n"
        f"spec = importlib.util.spec_from_file_location('xforms_for_vscode', {str(root / 'sdfg_fixtures' / 'vscode_transformations.py')!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"sdfg = dace.SDFG.from_file({str(root / 'sdfg_fixtures' / 'seed_vertical_difference.sdfg')!r})\n"
        "print(sorted({type(m).__name__ for m in SDFGOptimizer(sdfg).get_pattern_matches()}))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'InlineFuser'" in out.stdout.strip().splitlines()[-1]
