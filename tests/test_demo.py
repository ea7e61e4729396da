"""The demo's screen, without compiling: the warning filters, progress lines, and the
target's inputs from its signature (its timing: tests/test_timing.py)."""

import warnings

import numpy as np
import pytest

from gt4py_dace_xforms.cli import demo


def test_quiet_filters_only_inside_the_demo():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with demo.quiet_third_party():
            for _ in range(3):
                warnings.warn(
                    "Python is not running in optimized mode, which may impact performance.",
                    UserWarning,
                    stacklevel=1,
                )
                warnings.warn("something else", UserWarning, stacklevel=1)
        warnings.warn(
            "Python is not running in optimized mode, which may impact performance.",
            UserWarning,
            stacklevel=1,
        )
    messages = [str(w.message) for w in caught]
    assert messages.count("something else") == 1  # shown once
    assert sum(m.startswith("Python is not running") for m in messages) == 1  # only the one outside


def test_progress_prints_one_line_when_not_a_terminal(capsys):
    with demo.progress("compiling x"):
        pass
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == "  compiling x ..."
        and out[1].startswith("  compiling x: ")
        and out[1].endswith(" s")
    )


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
    from user_programs import shifted_sum

    from gt4py_dace_xforms.tools.programs import random_args

    args = random_args(shifted_sum, {"Cell": 64, "K": 7}, seed=2, scalars={"nlev": 7})
    assert list(args) == ["a", "b", "out", "nlev"]
    assert args["a"].asnumpy().shape == (64, 7) and args["nlev"] == np.int32(7)
    assert 0.5 <= args["a"].asnumpy().min() and args["a"].asnumpy().max() < 1.5
    again = random_args(shifted_sum, {"Cell": 64, "K": 7}, seed=2, scalars={"nlev": 7})
    assert np.array_equal(again["b"].asnumpy(), args["b"].asnumpy())
    with pytest.raises(
        ValueError, match=r"no value for integer/boolean scalar parameter\(s\) \['nlev'\]"
    ):
        random_args(shifted_sum, {"Cell": 64, "K": 7})
    with pytest.raises(ValueError, match=r"no size for dimension\(s\) \['K'\] of field 'a'"):
        random_args(shifted_sum, {"Cell": 64}, scalars={"nlev": 7})
