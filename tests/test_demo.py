"""The demo's measurement and screen, without compiling: timing order and fresh inputs,
the A/A verdict, the warning filters, and the target's inputs from its signature."""

import warnings

import numpy as np
import pytest

import gt4py.next as gtx
from gt4py_dace_xforms.cli import demo


def test_every_build_once_per_round_rotating_on_fresh_copies():
    a = gtx.as_field([demo.Cell, demo.K], np.ones((4, 3)))
    seen = []

    def call(label):
        def run(args):
            assert args["a"] is not a and np.array_equal(args["a"].asnumpy(), a.asnumpy())
            args["a"].asnumpy()[:] = 7.0  # an output written in place must not leak into the next call
            seen.append((label, id(args["a"])))
        return run

    times = demo.time_builds({"x": call("x"), "y": call("y"), "z": call("z")}, {"a": a, "n": 3}, rounds=4)
    assert [label for label, _ in seen] == list("xyz" "yzx" "zxy" "xyz")
    assert {k: len(v) for k, v in times.items()} == {"x": 4, "y": 4, "z": 4}
    assert np.all(a.asnumpy() == 1.0)


def test_verdict_against_the_a_a_floor():
    noise = demo.Timing("second stock", (1.02, 0.97, 1.0), (1.0, 1.0, 1.0))  # deviates up to 3%
    assert demo.verdict(0.98, noise).startswith("no measurable difference (A/A rounds deviate up to 3.0%)")
    assert demo.verdict(1.03, noise).startswith("no measurable difference")
    assert demo.verdict(0.8, noise) == "faster: 0.800x stock, outside the A/A floor of 3.0%"
    assert demo.verdict(1.2, noise).startswith("slower: 1.200x stock")


def test_timing_ratio_is_the_median_of_per_round_ratios():
    t = demo.Timing("library", (0.9, 0.5, 0.8), (1.0, 1.0, 0.5))
    assert t.ratios == [0.9, 0.5, 1.6]
    assert t.ratio == 0.9 and t.spread == (0.5, 1.6)
    assert t.median_ms == pytest.approx(800.0)


def test_quiet_filters_only_inside_the_demo():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with demo.quiet_third_party():
            for _ in range(3):
                warnings.warn("Python is not running in optimized mode, which may impact performance.", UserWarning)
                warnings.warn("something else", UserWarning)
        warnings.warn("Python is not running in optimized mode, which may impact performance.", UserWarning)
    messages = [str(w.message) for w in caught]
    assert messages.count("something else") == 1  # shown once
    assert sum(m.startswith("Python is not running") for m in messages) == 1  # only the one outside


def test_progress_prints_one_line_when_not_a_terminal(capsys):
    with demo.progress("compiling x"):
        pass
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "  compiling x ..." and out[1].startswith("  compiling x: ") and out[1].endswith(" s")


def test_target_inputs_follow_its_signature():
    pytest.importorskip("icon4py.model.atmosphere.dycore.dycore_states")
    from gt4py.next.type_system import type_translation

    from gt4py_dace_xforms.integration.capture import program_arg_types

    args = demo.target_args(12, 5, seed=1)
    declared = program_arg_types(demo.target_program())
    assert [type_translation.from_value(v) for v in args.values()] == list(declared)
    assert args["theta_v_at_cells_on_half_levels"].asnumpy().shape == (12, 6)  # half levels
    assert args["perturbed_rho_at_cells_on_model_levels"].asnumpy().shape == (12, 5)
    assert int(args["surface_level"]) == 6
    assert all(k in args for k in demo.TARGET_OUTPUTS)


def test_random_args_from_a_users_signature():
    from gt4py_dace_xforms.integration.programs import random_args
    from user_programs import shifted_sum

    args = random_args(shifted_sum, {"Cell": 64, "K": 7}, seed=2, scalars={"nlev": 7})
    assert list(args) == ["a", "b", "out", "nlev"]
    assert args["a"].asnumpy().shape == (64, 7) and args["nlev"] == np.int32(7)
    assert 0.5 <= args["a"].asnumpy().min() and args["a"].asnumpy().max() < 1.5
    again = random_args(shifted_sum, {"Cell": 64, "K": 7}, seed=2, scalars={"nlev": 7})
    assert np.array_equal(again["b"].asnumpy(), args["b"].asnumpy())
    with pytest.raises(ValueError, match=r"no value for integer/boolean scalar parameter\(s\) \['nlev'\]"):
        random_args(shifted_sum, {"Cell": 64, "K": 7})
    with pytest.raises(ValueError, match=r"no size for dimension\(s\) \['K'\] of field 'a'"):
        random_args(shifted_sum, {"Cell": 64}, scalars={"nlev": 7})
