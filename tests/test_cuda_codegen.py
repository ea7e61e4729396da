"""The GPU path without a GPU: the seed program's CUDA code, generated through the library's
GPU backend with the cost model and with everything sound, compiles with nvcc for sm_90.

`make gpu-check` does the same for all seed programs and the target; this is its quick part,
so that a GPU code-generation break shows in `make test`.
"""

import os
import pathlib

import dace
import gt4py.next as gtx
import numpy as np
import pytest

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.measure import cuda_check
from gt4py_dace_xforms.tools.compare import inline_build


_ROOT = pathlib.Path(__file__).resolve().parent.parent
_BUILD = pathlib.Path(os.environ.get("GT4PY_DACE_XFORMS_TEST_BUILD", _ROOT / ".build"))
TOOLKIT = cuda_check.find_cuda_toolkit()

needs_nvcc = pytest.mark.skipif(
    TOOLKIT is None,
    reason="no nvcc: `make gpu-tools` installs NVIDIA's CUDA wheels into .venv (needs PyPI)",
)


def _seed_args() -> dict:
    n, nlev = 64, 10
    return {
        "interior": gtx.as_field([demo.Cell, demo.K], np.ones((n, nlev))),
        "surface": gtx.as_field([demo.Cell, demo.K], np.ones((n, nlev))),
        "out": gtx.zeros({demo.Cell: n, demo.K: nlev}, dtype=gtx.float64),
        "nlev": np.int32(nlev),
    }


@pytest.mark.compile
@needs_nvcc
def test_seed_program_cuda_objects_compile_with_both_policies():
    # one test, not two: both policies inline the same candidate here, so the second
    # compile is a cache hit (two xdist workers would both compile it)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    for policy in ("cost_model", "all_sound"):
        build = inline_build(
            gpu=True, policy=gx.InlineWhereSound() if policy == "all_sound" else None
        )
        sdfg = cuda_check.translate(
            build.backend, demo.vertical_difference_computed_program, _seed_args(), {}
        )
        code = cuda_check.generate(sdfg, _BUILD / worker / "cuda" / policy)

        # what is compiled is the library's output: the concat_where node inlined, its
        # branch selection (a ConditionalBlock) evaluated inside the kernel
        assert len(build.report.applied) == 1, f"{policy}:\n{build.report.table()}"
        assert cuda_check.conditionals_in_kernels(sdfg) >= 1, policy
        assert code.kernels() >= 1, policy

        results = cuda_check.compile_objects(
            code, TOOLKIT, cu_only=True, cache_dir=_BUILD / "cuda_objects"
        )
        assert [r.source.suffix for r in results] == [".cu"], policy
        for r in results:
            assert r.ok, f"{policy}: {cuda_check.failure_text(r)}"


def test_object_command_follows_dace_cmake_flags(tmp_path):
    toolkit = cuda_check.CudaToolkit(
        pathlib.Path("/x/bin/nvcc"), (pathlib.Path("/x/include"),), "13.0.88", "test"
    )
    code = cuda_check.GeneratedCode(
        folder=tmp_path, files=(tmp_path / "src/cuda/p_cuda.cu", tmp_path / "src/cpu/p.cpp"), cpp_standard="20",
        cuda_args=("-O3",), host_args=("-O3", "-Wall"), forwarded_host_args=("-O3",), build_type_flags=("-DNDEBUG",),
    )  # fmt: skip
    cu = cuda_check.object_command(code, code.files[0], toolkit, tmp_path / "a.o", arch="90")
    assert cu[:2] == ["/x/bin/nvcc", "-c"]
    for flag in (
        "-std=c++20",
        "--expt-relaxed-constexpr",
        "-rdc=true",
        "-gencode=arch=compute_90,code=sm_90",
        "-DWITH_CUDA",
    ):
        assert flag in cu
    cpp = cuda_check.object_command(code, code.files[1], toolkit, tmp_path / "b.o")
    assert "-I/x/include" in cpp and "-DWITH_CUDA" in cpp and "/x/bin/nvcc" not in cpp


def test_nvcc_from_environment_must_be_executable(monkeypatch, tmp_path):
    monkeypatch.setenv(cuda_check.NVCC_ENV, str(tmp_path / "missing-nvcc"))
    with pytest.raises(cuda_check.CudaCheckError, match="not an executable"):
        cuda_check.find_cuda_toolkit()


def test_a_cpu_sdfg_has_no_cuda_code(tmp_path):
    import dace

    sdfg = dace.SDFG("cpu_only")
    sdfg.add_array("a", [4], dace.float64)
    state = sdfg.add_state()
    state.add_mapped_tasklet(
        "m", {"i": "0:4"}, {}, "o = 1.0", {"o": dace.Memlet("a[i]")}, external_edges=True
    )
    with pytest.raises(cuda_check.CudaCheckError, match=r"no \.cu file"):
        cuda_check.generate(sdfg, tmp_path)


def test_translate_names_missing_arguments():
    args = {k: v for k, v in _seed_args().items() if k != "nlev"}
    with pytest.raises(cuda_check.CudaCheckError, match=r"arguments missing: \['nlev'\]"):
        cuda_check.translate(None, demo.vertical_difference_computed_program, args, {})


@pytest.mark.icon4py
@pytest.mark.compile
@needs_nvcc
def test_the_solvers_sweep_pair_compiles_to_local_arrays():
    """The GPU model's sweep pair (docs/scans.md) on icon4py's corrector solver, built
    static for a limited-area decomposed rank at R2B4 size as `setup_program` builds it:
    the 64-thread blocks of its 18720 columns put 192 threads on an SM, whose columns (2 x
    80 doubles each, 240 KiB) fit the H100's 256 KiB L1, so the GPU model takes it. The
    two arrays become per-thread buffers of constant length (Register storage), and ptxas
    makes them a local-memory stack frame of the fused kernel, without spills."""
    pytest.importorskip(
        "icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver"
    )
    from gt4py_dace_xforms.integration.capture import OPTIMIZED, capture_stages
    from gt4py_dace_xforms.integration.hooks import optimization_hooks
    from gt4py_dace_xforms.tools import explain, programs
    from gt4py_dace_xforms.tools.static_values import program_static_values, static_offset_provider

    name = "vertically_implicit_solver_at_corrector_step"
    program = programs.load_program(
        f"icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver:{name}"
    )
    provider = explain.offset_provider(
        program, static_offset_provider(program, layout="lam-decomposed")
    )
    static = program_static_values(program, layout="lam-decomposed")
    reports = []
    hooks = optimization_hooks(gx.CostModel("gpu", fresh_page_bytes=0), gpu=True, reports=reports)
    sdfg = capture_stages(
        program,
        [OPTIMIZED],
        offset_provider=provider,
        static_args=static,
        gpu=True,
        optimization_hooks=hooks,
    )[OPTIMIZED]
    taken = [r for rep in reports for r in rep.applied if r.mode == "sweep_pair"]
    assert sorted(r.intermediate for r in taken) == ["gtir_tmp_148", "gtir_tmp_154"]
    assert (
        taken[0].figures["gpu_threads_per_sm"] == 192
        and taken[0].figures["gpu_column_bytes_per_sm"] == 192 * 1280
    )
    assert not {"gtir_tmp_148", "gtir_tmp_154"} & set(sdfg.arrays)
    # z_alpha reaches the scan only through the coefficients moved into its loop: the
    # scan guard leaves it to the estimate, which takes it (docs/scans.md)
    assert "gtir_tmp_32" not in sdfg.arrays and "gtir_tmp_31" in sdfg.arrays
    columns = {n: d for n, d in sdfg.arrays.items() if n.startswith("__sweep_col_")}
    assert sorted(columns) == ["__sweep_col_gtir_tmp_148", "__sweep_col_gtir_tmp_154"]
    assert all(
        tuple(d.shape) == (80,) and d.storage == dace.StorageType.Register for d in columns.values()
    )

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    code = cuda_check.generate(sdfg, _BUILD / worker / "cuda" / "sweep_pair")
    kernels = {k.name: k for k in cuda_check.kernel_resources(code, TOOLKIT)}
    (fused,) = [k for n, k in kernels.items() if n.startswith(f"{taken[0].consumer}_")]
    assert fused.stack_bytes >= 2 * 80 * 8 and fused.spill_store_bytes == 0, fused
    assert all(k.stack_bytes == 0 for n, k in kernels.items() if k is not fused), kernels
