"""Ready gt4py backends running the inliner: `run_dace_cpu`, `run_dace_gpu`, `make_backend`.

program.with_backend(gt4py_dace_xforms.backends.run_dace_cpu)(...)
"""

from gt4py_dace_xforms.integration.backends import make_backend, run_dace_cpu, run_dace_gpu


__all__ = ["make_backend", "run_dace_cpu", "run_dace_gpu"]
