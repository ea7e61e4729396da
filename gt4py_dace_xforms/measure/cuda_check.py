"""CUDA code of a gt4py program, generated through the library's GPU backend and compiled
with nvcc, on a machine without a GPU.

GPU machines are rare; this catches a break of the GPU path on a CPU machine. Three steps:

- `translate()`: the backend's own steps, `backend.transforms` (DSL to GTIR) and
  `backend.executor.translation` (the annotating translator with the library's hooks, or
  gt4py's stock one), for `gpu=True`. Translation needs no GPU.
- `generate()`: DaCe's code generation inside gt4py's `dace_context` for CUDA, as gt4py's
  compile step runs it, written in DaCe's program-folder layout (`src/cpu`, `src/cuda`).
- `compile_objects()`: every file DaCe's CMake would compile (`dace_files.csv`), one object
  each, with the flags its CMakeLists gives them: `nvcc -c` for `.cu` (C++ standard,
  `--expt-relaxed-constexpr`, separable compilation, the configured CUDA and forwarded host
  arguments), the host compiler for `.cpp` (`-DWITH_CUDA`, the CUDA headers). Nothing is
  linked or run.

The toolkit is looked up by `find_cuda_toolkit()`: `$GT4PY_DACE_XFORMS_NVCC`, NVIDIA's
PyPI wheels in this environment (`make gpu-tools` installs them), then `nvcc` on `PATH`.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import hashlib
import importlib.util
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import time
from typing import Any, Mapping, Optional, Sequence, cast

import dace


#: Compute capability compiled for: the H100/H200 (Hopper) of the GPU machines.
DEFAULT_ARCH = "90"

NVCC_ENV = "GT4PY_DACE_XFORMS_NVCC"


class CudaCheckError(Exception):
    """A step of the check could not run (no toolkit, bad input)."""


# ---------------------------------------------------------------------------------------
# toolkit


@dataclasses.dataclass(frozen=True)
class CudaToolkit:
    """The CUDA compiler the check uses, its headers, version and where it was found."""

    nvcc: pathlib.Path
    #: include directories holding `cuda_runtime.h` (and CCCL), for the host compiler
    includes: tuple[pathlib.Path, ...]
    #: e.g. "13.0.88"
    version: str
    #: where it was found: "$GT4PY_DACE_XFORMS_NVCC", "wheel" or "PATH"
    source: str


def _wheel_nvccs() -> list[pathlib.Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in map(pathlib.Path, spec.submodule_search_locations):
        # CUDA 13 wheels share one tree (nvidia/cu13); CUDA 12 wheels one per component.
        found += [
            p
            for p in (root / "cu13" / "bin" / "nvcc", root / "cuda_nvcc" / "bin" / "nvcc")
            if p.is_file()
        ]
    return found


def _includes(nvcc: pathlib.Path) -> tuple[pathlib.Path, ...]:
    top = nvcc.resolve().parent.parent
    candidates = [top / "include", top / "include" / "cccl"]
    # CUDA 12 wheels: the runtime and CCCL headers are siblings of nvidia/cuda_nvcc
    candidates += [top.parent / "cuda_runtime" / "include", top.parent / "cuda_cccl" / "include"]
    return tuple(c for c in candidates if c.is_dir())


def _version(nvcc: pathlib.Path) -> str:
    out = subprocess.run(
        [str(nvcc), "--version"], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    if not m:
        raise CudaCheckError(f"cannot read the version of {nvcc}: {out.strip()[-200:]!r}")
    return m.group(1)


def find_cuda_toolkit() -> Optional[CudaToolkit]:
    """The nvcc to use and its headers, or None if there is none.

    Returns:
        the `CudaToolkit`, or None.

    Raises:
        CudaCheckError: where `GT4PY_DACE_XFORMS_NVCC` names no working nvcc.
    """
    candidates: list[tuple[pathlib.Path, str]] = []
    if os.environ.get(NVCC_ENV):
        candidates.append((pathlib.Path(os.environ[NVCC_ENV]), f"${NVCC_ENV}"))
    candidates += [(p, "wheel") for p in _wheel_nvccs()]
    if shutil.which("nvcc"):
        candidates.append((pathlib.Path(cast(str, shutil.which("nvcc"))), "PATH"))
    for nvcc, source in candidates:
        if not os.access(nvcc, os.X_OK):
            if source.startswith("$"):
                raise CudaCheckError(f"{NVCC_ENV}={nvcc} is not an executable file")
            continue
        includes = _includes(nvcc)
        if not any((i / "cuda_runtime.h").is_file() for i in includes):
            continue
        return CudaToolkit(nvcc=nvcc, includes=includes, version=_version(nvcc), source=source)
    return None


# ---------------------------------------------------------------------------------------
# translation through a backend


def _compile_time_args(program: Any, args: Mapping[str, Any], offset_provider: Mapping[str, Any]):
    from gt4py.next.otf import arguments
    from gt4py.next.type_system import type_translation

    ftype = program.past_stage.past_node.type.definition
    names = [*ftype.pos_or_kw_args]
    missing = [n for n in names if n not in args]
    if missing or ftype.pos_only_args:
        name = getattr(program.definition_stage.definition, "__name__", "program")
        raise CudaCheckError(f"{name}: arguments missing: {missing}")
    return arguments.CompileTimeArgs(
        args=tuple(type_translation.from_value(args[n]) for n in names),
        kwargs={},
        offset_provider=dict(offset_provider),
        column_axis=None,  # as the JIT call path (`CompiledProgramsPool`)
        argument_descriptor_contexts={},
    )


def translate(
    backend: Any, program: Any, args: Mapping[str, Any], offset_provider: Mapping[str, Any]
) -> dace.SDFG:
    """The SDFG `backend` hands to its compile step for `program(**args)`: its transforms,
    then its translation step (the library's hooks run in there).

    Args:
        backend: the gt4py backend.
        program: the gt4py program.
        args: the program's keyword arguments.
        offset_provider: the offset provider.

    Returns:
        the SDFG.
    """
    from gt4py_dace_xforms.integration import compat

    cta = _compile_time_args(program, args, offset_provider)
    compilable = backend.transforms(
        compat.ConcreteProgramDef(data=program.definition_stage, args=cta)
    )
    source = backend.executor.translation(compilable)
    return dace.SDFG.from_json(source.source_code)


# ---------------------------------------------------------------------------------------
# code generation


@dataclasses.dataclass(frozen=True)
class GeneratedCode:
    """The code DaCe generated for one SDFG: its folder, the files its CMake compiles, and the
    compiler settings."""

    folder: pathlib.Path
    #: the files DaCe's CMake compiles, absolute
    files: tuple[pathlib.Path, ...]
    #: compiler settings read from `dace.Config` inside gt4py's context
    cpp_standard: str
    cuda_args: tuple[str, ...]
    host_args: tuple[str, ...]
    forwarded_host_args: tuple[str, ...]
    build_type_flags: tuple[str, ...]

    @property
    def cu_files(self) -> tuple[pathlib.Path, ...]:
        """The generated CUDA (`.cu`) files."""
        return tuple(f for f in self.files if f.suffix == ".cu")

    def kernels(self) -> int:
        """`__global__` functions in the `.cu` files.

        Returns:
            the count.
        """
        return sum(len(re.findall(r"__global__\s", f.read_text())) for f in self.cu_files)


def generate(sdfg: dace.SDFG, folder: pathlib.Path) -> GeneratedCode:
    """Generate the code of a GPU SDFG (as `DaCeCompiler` would, without building it) into
    `folder` (DaCe's program-folder layout).

    Args:
        sdfg: the GPU SDFG.
        folder: the program folder.

    Returns:
        the `GeneratedCode`.

    Raises:
        CudaCheckError: where code generation fails.
    """
    from dace.codegen import codegen, compiler, compiler_family
    from dace.codegen.targets import cuda as cuda_target
    from gt4py._core import definitions as core_defs
    from gt4py.next import config as gtx_config
    from gt4py.next.program_processors.runners.dace.workflow import common as gtx_wfdcommon

    folder = pathlib.Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with gtx_wfdcommon.dace_context(
        device_type=core_defs.DeviceType.CUDA, cmake_build_type=gtx_config.CMAKE_BUILD_TYPE
    ):
        sdfg = copy.deepcopy(sdfg)  # code generation changes the SDFG
        sdfg.build_folder = str(folder)
        sdfg.fill_scope_connectors()
        objects = codegen.generate_code(sdfg, validate=False)
        compiler.generate_program_folder(sdfg, objects, str(folder))
        settings: dict[str, Any] = dict(  # GeneratedCode's compiler settings
            cpp_standard=str(dace.Config.get("compiler", "cpp_standard")),
            cuda_args=tuple(shlex.split(dace.Config.get("compiler", "cuda", "args") or "")),
            host_args=tuple(shlex.split(compiler_family.cpu_args() or "")),
            forwarded_host_args=tuple(cuda_target.forwarded_host_args()),
            build_type_flags=tuple(compiler.build_type_flags()),
        )
    files = []
    for line in (folder / "dace_files.csv").read_text().splitlines():
        target, target_type, name = line.strip().split(",")
        files.append(
            folder / "src" / target / target_type / name
            if target_type
            else folder / "src" / target / name
        )
    if not any(f.suffix == ".cu" for f in files):
        raise CudaCheckError(
            f"{sdfg.name}: DaCe generated no .cu file (no GPU schedule in the SDFG?)"
        )
    return GeneratedCode(folder=folder, files=tuple(files), **settings)


# ---------------------------------------------------------------------------------------
# compiling


@dataclasses.dataclass(frozen=True)
class ObjectResult:
    """One generated file compiled to an object: the command, whether it succeeded, how long it
    took, and the compiler's output."""

    source: pathlib.Path
    command: tuple[str, ...]
    ok: bool
    seconds: float
    #: the object came from the cache (same source, command and compiler)
    cached: bool
    #: compiler diagnostics lines containing "warning"
    warnings: int
    output: str

    def summary(self) -> str:
        """One line: the file, ok or FAILED, seconds (or cached), warning lines.

        Returns:
            the line.
        """
        state = "ok" if self.ok else "FAILED"
        how = "cached" if self.cached else f"{self.seconds:.1f} s"
        return f"{self.source.name}: {state} ({how}, {self.warnings} warning lines)"


def _runtime_include() -> pathlib.Path:
    return pathlib.Path(dace.__file__).resolve().parent / "runtime" / "include"


def object_command(
    code: GeneratedCode,
    source: pathlib.Path,
    toolkit: CudaToolkit,
    out: pathlib.Path,
    arch: str = DEFAULT_ARCH,
) -> list[str]:
    """The compile line for one generated file, after DaCe's `codegen/CMakeLists.txt`.

    Args:
        code: the generated code.
        source: the file to compile.
        toolkit: the CUDA toolkit.
        out: the object file.
        arch: the GPU architecture (`sm_90`).

    Returns:
        the command, as arguments.
    """
    common = [
        "-DWITH_CUDA",
        f'-DDACE_BINARY_DIR="{code.folder / "build"}"',
        f"-I{_runtime_include()}",
    ]
    if source.suffix == ".cu":
        return [
            str(toolkit.nvcc), "-c", "-x", "cu", f"-std=c++{code.cpp_standard}", "--expt-relaxed-constexpr",
            "-rdc=true", "-Xcompiler=-fPIC", f"-gencode=arch=compute_{arch},code=sm_{arch}",
            *code.cuda_args, *(f"-Xcompiler={f}" for f in code.forwarded_host_args), *code.build_type_flags,
            *common, str(source), "-o", str(out),
        ]  # fmt: skip
    from dace.codegen import compiler_family

    return [
        compiler_family.host_compiler(), "-c", f"-std=c++{code.cpp_standard}", "-fPIC", "-fopenmp",
        *code.host_args, *code.build_type_flags, *common, *(f"-I{i}" for i in toolkit.includes),
        str(source), "-o", str(out),
    ]  # fmt: skip


def _cache_key(
    command: Sequence[str], code: GeneratedCode, source: pathlib.Path, toolkit: CudaToolkit
) -> str:
    # The build folder only appears in paths (the output, DACE_BINARY_DIR's string): left
    # out, so the same code generated into another folder is the same compile.
    h = hashlib.sha256()
    for part in command:
        h.update(part.replace(str(source), "<src>").replace(str(code.folder), "<folder>").encode())
    h.update(source.read_bytes())
    h.update(f"{toolkit.version} {dace.__version__} {_runtime_include()}".encode())
    return h.hexdigest()[:32]


def compile_one(
    code: GeneratedCode,
    source: pathlib.Path,
    toolkit: CudaToolkit,
    *,
    arch: str = DEFAULT_ARCH,
    cache_dir: Optional[pathlib.Path] = None,
) -> ObjectResult:
    """Compile one generated file to an object (`object_command`), or take it from `cache_dir`
    where the same source, command and compiler compiled it before.

    Args:
        code: the generated code.
        source: the file to compile.
        toolkit: the CUDA toolkit.
        arch: the GPU architecture.
        cache_dir: the object cache (None: no cache).

    Returns:
        the `ObjectResult`.
    """
    out = code.folder / "build" / (source.name + ".o")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = object_command(code, source, toolkit, out, arch)
    # Dependencies are the generated source plus headers fixed by the toolkit and dace
    # versions, so a hit is the same compile; only successful objects are stored.
    cached = cache_dir / (_cache_key(command, code, source, toolkit) + ".o") if cache_dir else None
    if cached is not None and cached.is_file():
        shutil.copyfile(cached, out)
        return ObjectResult(source, tuple(command), True, 0.0, True, 0, "")
    t0 = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    output = proc.stdout + proc.stderr
    ok = proc.returncode == 0 and out.is_file()
    if ok and cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(out, tmp)
        os.replace(tmp, cached)
    warnings = sum(1 for line in output.splitlines() if "warning" in line)
    return ObjectResult(source, tuple(command), ok, seconds, False, warnings, output)


def compile_objects(
    code: GeneratedCode,
    toolkit: CudaToolkit,
    *,
    arch: str = DEFAULT_ARCH,
    cu_only: bool = False,
    jobs: int = 1,
    cache_dir: Optional[pathlib.Path] = None,
) -> list[ObjectResult]:
    """Compile the generated files (`cu_only`: the `.cu` ones) to objects, `jobs` at a time.

    Args:
        code: the generated code.
        toolkit: the CUDA toolkit.
        arch: the GPU architecture.
        cu_only: compile the `.cu` files only.
        jobs: compilations in parallel.
        cache_dir: the object cache (None: no cache).

    Returns:
        one `ObjectResult` per file.
    """
    files = code.cu_files if cu_only else code.files
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(
            pool.map(lambda f: compile_one(code, f, toolkit, arch=arch, cache_dir=cache_dir), files)
        )


@dataclasses.dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel: registers per thread, and the per-thread stack
    frame (local memory: arrays a thread indexes at run time, spills) with its spills."""

    name: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")


def _kernel_name(mangled: str) -> str:
    """`_Z22map_62_fieldop_0_0_359PKd...` -> `map_62_fieldop_0_0_359` (the Itanium length prefix)."""
    m = re.match(r"_Z(\d+)", mangled)
    return mangled[m.end() : m.end() + int(m.group(1))] if m else mangled


def parse_ptxas(output: str) -> list[KernelResources]:
    """The kernels of `nvcc -Xptxas=-v` output, in the order ptxas compiled them.

    Args:
        output: the compiler's output.

    Returns:
        one `KernelResources` per kernel.
    """
    found: list[KernelResources] = []
    name: Optional[str] = None
    frame: tuple[int, ...] = (0, 0, 0)
    for line in output.splitlines():
        if (m := _ENTRY.search(line)) is not None:
            name, frame = _kernel_name(m.group(1)), (0, 0, 0)
        elif name is not None and (m := _FRAME.search(line)) is not None:
            frame = tuple(int(g) for g in m.groups())
        elif name is not None and (m := _REGISTERS.search(line)) is not None:
            found.append(KernelResources(name, int(m.group(1)), *frame))
            name = None
    return found


def kernel_resources(
    code: GeneratedCode, toolkit: CudaToolkit, *, arch: str = DEFAULT_ARCH
) -> list[KernelResources]:
    """Compile every generated `.cu` file with ptxas' verbose report (`-Xptxas=-v`) and
    return each kernel's registers and local memory. Raises `CudaCheckError` if one fails.

    Args:
        code: the generated code.
        toolkit: the CUDA toolkit.
        arch: the GPU architecture.

    Returns:
        one `KernelResources` per kernel.

    Raises:
        CudaCheckError: where a file does not compile.
    """
    kernels = []
    for source in code.cu_files:
        out = code.folder / "build" / (source.name + ".resources.o")
        out.parent.mkdir(parents=True, exist_ok=True)
        command = object_command(code, source, toolkit, out, arch)
        command.insert(1, "-Xptxas=-v")
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CudaCheckError(f"{source}: compile failed:\n{proc.stderr[-3000:]}")
        kernels.extend(parse_ptxas(proc.stdout + proc.stderr))
    return kernels


def failure_text(result: ObjectResult, lines: int = 30) -> str:
    """The compiler's errors (its warnings left out), last `lines` lines, and the command.

    Args:
        result: the failed compilation.
        lines: how many lines of errors to keep.

    Returns:
        the text.
    """
    kept = [
        ln for ln in result.output.splitlines() if "error" in ln.lower() or "fatal" in ln.lower()
    ]
    body = "\n".join((kept or result.output.splitlines())[-lines:])
    return f"{result.source}: compile failed\n{body}\ncommand: {shlex.join(result.command)}"


# ---------------------------------------------------------------------------------------
# what the SDFG holds


def conditionals_in_kernels(sdfg: dace.SDFG) -> int:
    """`ConditionalBlock`s in nested SDFGs inside GPU-device Maps: lazy `concat_where`
    selections that run inside a kernel.

    Args:
        sdfg: the GPU SDFG.

    Returns:
        the count.
    """
    from dace.sdfg import nodes as dn
    from dace.sdfg.state import ConditionalBlock

    count = 0
    for node, state in sdfg.all_nodes_recursive():
        if not isinstance(node, dn.NestedSDFG) or not isinstance(state, dace.SDFGState):
            continue
        scope = state.entry_node(node)
        while scope is not None and scope.map.schedule not in dace.dtypes.GPU_SCHEDULES:
            scope = state.entry_node(scope)
        if scope is None:
            continue
        count += sum(
            1 for b in node.sdfg.all_control_flow_blocks() if isinstance(b, ConditionalBlock)
        )
    return count
