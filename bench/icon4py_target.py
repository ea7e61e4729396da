"""The measured target, icon4py 0.4.1's `compute_perturbed_quantities_and_interpolation`,
for the benchmarks and the tests (which put this folder on `sys.path`).

Its inputs come from the signature (`gt4py_dace_xforms.tools.programs.random_args`);
what is specific to it (scalar values, half levels, outputs) is defined once, in the demo
(`gt4py_dace_xforms.cli.demo`), which runs it too.
"""

from __future__ import annotations

from typing import Any

from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.tools.programs import copy_args  # noqa: F401  # re-exported for the callers


MODULE, _, PROGRAM = demo.TARGET_SPEC.partition(":")
OUTPUTS = demo.TARGET_OUTPUTS


def program() -> Any:
    return demo.target_program()


def available() -> bool:
    try:
        program()
    except ValueError:
        return False
    return True


def make_args(
    n_cells: int, n_levels: int, *, seed: int = 0, taylor_hydro: bool = True
) -> dict[str, Any]:
    """Keyword arguments: random fields in [0.5, 1.5), the full domain, `nflatlev=4`
    (see `demo.target_args`)."""
    return demo.target_args(n_cells, n_levels, seed=seed, taylor_hydro=taylor_hydro)
