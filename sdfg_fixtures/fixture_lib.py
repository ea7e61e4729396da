"""Helpers that build the SDFG fixtures in this folder (and that tests may reuse).

Not a package: tests put this folder on `sys.path` and `import fixture_lib`.

The central helper is `lower_and_capture()` (from `gt4py_dace_xforms.integration.capture`,
re-exported here): it lowers a gt4py program exactly as the DaCe backend does and hands
back the SDFG at one of `gt_auto_optimize`'s hook points, without compiling.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import dace
import gt4py.next as gtx
from dace.sdfg import nodes as dn
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)


FIXTURE_DIR = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------
# Lowering gt4py programs to SDFGs
# --------------------------------------------------------------------------------------

from gt4py_dace_xforms.integration.capture import (  # noqa: E402,F401  # re-exported for the tests
    LOWERED,
    OPTIMIZED,
    STAGE_HOOKS,
    compile_time_args,
    lower_and_capture,
    lower_to_gtir,
    program_arg_types,
)


# --------------------------------------------------------------------------------------
# gt4py seed programs
# --------------------------------------------------------------------------------------

Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[gtx.Dims[Cell, K], gtx.float64]


@gtx.field_operator
def multi(a: F, b: F) -> F:
    t = a * 2.0 + b
    return t + t(K + 1) + t(K + 2)


@gtx.program
def prog_multi(a: F, b: F, out: F):
    multi(a, b, out=out[:, 0:8])


@gtx.field_operator
def theta_on_half_levels(interior: F, surface: F) -> F:
    return concat_where(K < 1, surface, interior)


@gtx.field_operator
def vertical_difference(interior: F, surface: F) -> F:
    theta = theta_on_half_levels(interior, surface)
    return theta(K + 1) - theta


@gtx.program
def prog_vertical_difference(interior: F, surface: F, out: F):
    vertical_difference(interior, surface, out=out[:, 0:9])


def seed_args(n_cells: int = 20, n_levels: int = 10, n_fields: int = 3) -> list:
    """`n_fields` zero Cell x K float64 fields (the seeds take 3: two inputs, `out`)."""
    return [gtx.zeros({Cell: n_cells, K: n_levels}, dtype=gtx.float64) for _ in range(n_fields)]


def _annotated(capture: Callable[[], dace.SDFG]) -> dace.SDFG:
    """Capture with the library's GTIR annotations recorded (what its backends lower with)."""
    from gt4py_dace_xforms.integration.lowering import record_annotations

    with record_annotations():
        return capture()


def seed_multi_offset_sdfg() -> dace.SDFG:
    return _annotated(
        lambda: lower_and_capture(prog_multi, seed_args(), {}, GT4PyAutoOptHook.TopLevelDataFlowPre)
    )


def seed_vertical_difference_sdfg() -> dace.SDFG:
    return _annotated(
        lambda: lower_and_capture(
            prog_vertical_difference, seed_args(), {}, GT4PyAutoOptHook.TopLevelDataFlowStep
        )
    )


# --------------------------------------------------------------------------------------
# icon4py
# --------------------------------------------------------------------------------------

import sys as _sys  # noqa: E402


_sys.path.append(str(FIXTURE_DIR.parent / "bench"))
import icon4py_target  # noqa: E402  # bench/icon4py_target.py: the target's inputs


icon4py_program = icon4py_target.program
icon4py_available = icon4py_target.available


def icon4py_args(n_cells: int = 20480, n_levels: int = 80) -> list:
    """Positional arguments for the target (see `icon4py_target.make_args`). Only their
    types reach the SDFG (no static arguments), so the captured SDFG does not depend on
    the values."""
    return list(icon4py_target.make_args(n_cells, n_levels).values())


def icon4py_sdfg() -> dace.SDFG:
    return _annotated(
        lambda: lower_and_capture(
            icon4py_program(), icon4py_args(), {}, GT4PyAutoOptHook.TopLevelDataFlowStep
        )
    )


def icon4py_static_args(n_cells: int = 20480, n_levels: int = 80) -> dict:
    """The target's bounds, levels and `igradp_method`, as icon4py's `setup_program`
    compiles them (static arguments; `tools.static.static_args`)."""
    from gt4py_dace_xforms.tools.static import static_args

    return static_args(icon4py_target.make_args(n_cells, n_levels))


def icon4py_static_sdfg() -> dace.SDFG:
    """The target as icon4py's model run builds it: the integer scalars are literals."""
    return _annotated(
        lambda: lower_and_capture(
            icon4py_program(),
            icon4py_args(),
            {},
            GT4PyAutoOptHook.TopLevelDataFlowStep,
            static_args=icon4py_static_args(),
        )
    )


# --------------------------------------------------------------------------------------
# Hand-built SDFG
# --------------------------------------------------------------------------------------


def build_two_symbol_index_sdfg() -> dace.SDFG:
    """Producer/consumer Maps with gt4py-style two-symbol indices (`k - ks`).

    `tmp[i - s0, k - ks] = a[i - s0, k - ks] * 2 + 1` over `i = s0:N, k = ks:K`;
    `out[i - s0, k - ks] = tmp[i - s0, k - ks + 1] - tmp[i - s0, k - ks]` over
    `i = s0:N, k = ks:K-1`.
    """
    sdfg = dace.SDFG("two_symbol_index")
    for sym in ("N", "K", "s0", "ks"):
        sdfg.add_symbol(sym, dace.int32)
    for name in ("a", "out"):
        sdfg.add_array(name, ["N", "K"], dace.float64)
    sdfg.add_array("tmp", ["N", "K"], dace.float64, transient=True)
    state = sdfg.add_state("main", is_start_block=True)
    a, tmp, out = (state.add_access(n) for n in ("a", "tmp", "out"))
    state.add_mapped_tasklet(
        "producer",
        map_ranges={"i": "s0:N", "k": "ks:K"},
        inputs={"__in": dace.Memlet("a[i - s0, k - ks]")},
        code="__out = __in * 2.0 + 1.0",
        outputs={"__out": dace.Memlet("tmp[i - s0, k - ks]")},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"tmp": tmp},
    )
    state.add_mapped_tasklet(
        "consumer",
        map_ranges={"i": "s0:N", "k": "ks:K-1"},
        inputs={
            "__up": dace.Memlet("tmp[i - s0, k - ks + 1]"),
            "__here": dace.Memlet("tmp[i - s0, k - ks]"),
        },
        code="__out = __up - __here",
        outputs={"__out": dace.Memlet("out[i - s0, k - ks]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"out": out},
    )
    sdfg.validate()
    return sdfg


# --------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------


def _states(sdfg: dace.SDFG, recursive: bool) -> Iterable[dace.SDFGState]:
    """States of `sdfg` (through its control-flow regions); of nested SDFGs if `recursive`."""
    if not recursive:
        return sdfg.all_states()
    return [s for sd in sdfg.all_sdfgs_recursive() for s in sd.all_states()]


def count_2d_transients(sdfg: dace.SDFG, recursive: bool = False) -> int:
    """Arrays with `transient=True` and two dimensions (of nested SDFGs too if `recursive`)."""
    sdfgs = sdfg.all_sdfgs_recursive() if recursive else [sdfg]
    return sum(
        1
        for sd in sdfgs
        for desc in sd.arrays.values()
        if isinstance(desc, dace.data.Array) and desc.transient and len(desc.shape) == 2
    )


def concat_nodes(
    sdfg: dace.SDFG, recursive: bool = False
) -> list[tuple[dace.SDFGState, dn.AccessNode]]:
    """Transient AccessNodes with two or more incoming edges (concat_where's result)."""
    return [
        (state, node)
        for state in _states(sdfg, recursive)
        for node in state.data_nodes()
        if node.desc(state.sdfg).transient and state.in_degree(node) >= 2
    ]


def count_concat_nodes(sdfg: dace.SDFG, recursive: bool = False) -> int:
    return len(concat_nodes(sdfg, recursive))


def candidate_reads(sdfg: dace.SDFG, recursive: bool = False) -> list[tuple[dace.SDFGState, Any]]:
    """Edges `(state, edge)` that read an intermediate inside a consumer Map.

    An intermediate is a transient 2-D AccessNode that feeds a top-level MapEntry;
    the candidate reads are the out-edges of that MapEntry (inside the consumer's
    scope) whose memlet data is the intermediate. These are the edges gt4py's
    `find_nodes_to_inline(sdfg, state, edge)` takes.
    """
    result = []
    for state in _states(sdfg, recursive):
        scope = state.scope_dict()
        for me in state.nodes():
            if not isinstance(me, dn.MapEntry) or scope[me] is not None:
                continue
            for ie in state.in_edges(me):
                src = ie.src
                if not isinstance(src, dn.AccessNode) or ie.dst_conn is None:
                    continue
                if not ie.dst_conn.startswith("IN_"):
                    continue
                desc = src.desc(state.sdfg)
                if not (
                    isinstance(desc, dace.data.Array) and desc.transient and len(desc.shape) == 2
                ):
                    continue
                for oe in state.out_edges_by_connector(me, "OUT_" + ie.dst_conn[3:]):
                    if oe.data.data == src.data:
                        result.append((state, oe))
    return result


def count_stock_inline_fuser(sdfg: dace.SDFG, recursive: bool = False) -> tuple[int, int]:
    """`(candidate reads, reads gt4py 1.2.3's find_nodes_to_inline accepts)`.

    An exception from `find_nodes_to_inline` counts as "not accepted".
    """
    from gt4py.next.program_processors.runners.dace.transformations.inline_fuser import (
        find_nodes_to_inline,
    )

    total = accepted = 0
    for state, edge in candidate_reads(sdfg, recursive):
        total += 1
        try:
            res = find_nodes_to_inline(state.sdfg, state, edge)
        except Exception:  # noqa: BLE001 - any failure is a refusal
            res = None
        accepted += res is not None
    return total, accepted


def run_inline_fusion(sdfg: dace.SDFG, **kwargs: Any):
    """`gt_inline_intermediates` on a deep copy; returns `(report, transformed copy)`."""
    from gt4py_dace_xforms import gt_inline_intermediates

    work = copy.deepcopy(sdfg)
    report = gt_inline_intermediates(work, **kwargs)
    return report, work


# --------------------------------------------------------------------------------------
# Fixture registry
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Fixture:
    name: str
    build: Callable[[], dace.SDFG]
    source: str
    stage: str
    needs_icon4py: bool = False

    @property
    def file(self) -> str:
        return f"{self.name}.sdfg"


FIXTURES: dict[str, Fixture] = {
    f.name: f
    for f in (
        Fixture(
            "seed_multi_offset",
            seed_multi_offset_sdfg,
            "gt4py: fixture_lib.prog_multi (t = a*2+b; t + t(K+1) + t(K+2)), Cell x K, "
            "20 x 10 float64, offset_provider={}",
            "gt_auto_optimize TopLevelDataFlowPre (call 1), dace CPU backend",
        ),
        Fixture(
            "seed_vertical_difference",
            seed_vertical_difference_sdfg,
            "gt4py: fixture_lib.prog_vertical_difference (theta = concat_where(K < 1, "
            "surface, interior); theta(K+1) - theta), Cell x K, 20 x 10 float64, "
            "offset_provider={}",
            "gt_auto_optimize TopLevelDataFlowStep (call 1), dace CPU backend",
        ),
        Fixture(
            "two_symbol_index",
            build_two_symbol_index_sdfg,
            "hand-built DaCe SDFG: tmp[i-s0, k-ks] = a[i-s0, k-ks]*2+1; "
            "out[i-s0, k-ks] = tmp[i-s0, k-ks+1] - tmp[i-s0, k-ks]",
            "hand-built (no gt4py)",
        ),
        Fixture(
            "icon4py_compute_perturbed_quantities_and_interpolation",
            icon4py_sdfg,
            f"icon4py 0.4.1: {icon4py_target.MODULE}.{icon4py_target.PROGRAM}, 20480 cells x 80 levels "
            "(81 for half-level fields), float64, model_top=0, surface_level=81, "
            "igradp_method=TAYLOR_HYDRO, offset_provider={}, GTIR annotations recorded",
            "gt_auto_optimize TopLevelDataFlowStep (call 1), dace CPU backend",
            needs_icon4py=True,
        ),
        Fixture(
            "icon4py_compute_perturbed_quantities_and_interpolation_static",
            icon4py_static_sdfg,
            f"icon4py 0.4.1: {icon4py_target.MODULE}.{icon4py_target.PROGRAM} as icon4py's setup_program "
            "compiles it: the same inputs, with the bounds (start_cell_lateral_boundary_level_3=0, "
            "end_cell_local=end_cell_halo=end_cell_halo_level_2=20480, nflatlev=4, nflat_gradp=6, model_top=0, "
            "surface_level=81) and igradp_method=TAYLOR_HYDRO as static arguments, GTIR annotations recorded",
            "gt_auto_optimize TopLevelDataFlowStep (call 1), dace CPU backend",
            needs_icon4py=True,
        ),
    )
}


def _stable_guids(obj: Any, name: str, counter: list[int]) -> None:
    """Replace every `guid` by a UUID derived from `name` and the traversal order."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "guid" and isinstance(value, str):
                obj[key] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sdfg_fixtures/{name}/{counter[0]}"))
                counter[0] += 1
            else:
                _stable_guids(value, name, counter)
    elif isinstance(obj, list):
        for value in obj:
            _stable_guids(value, name, counter)


def save_sdfg(sdfg: dace.SDFG, path: Union[str, Path], *, stable_guids: bool = True) -> Path:
    """`sdfg.save(path, compress=False)`, with reproducible element guids.

    DaCe gives every element a random `guid`; with `stable_guids` they are replaced
    by name-based UUIDs (still unique), so regenerating a fixture gives the same bytes.
    """
    path = Path(path)
    sdfg.save(str(path), compress=False)
    if stable_guids:
        data = json.loads(path.read_text())
        _stable_guids(data, path.stem, [0])
        path.write_text(dace.serialize.dumps(data))
    return path


def load_fixture(name: str, directory: Union[str, Path] = FIXTURE_DIR) -> dace.SDFG:
    """Load `<name>.sdfg` (name with or without the suffix) from `directory`."""
    file = name if name.endswith(".sdfg") else f"{name}.sdfg"
    return dace.SDFG.from_file(str(Path(directory) / file))


class _Timeout(Exception):
    pass


def _with_timeout(fun: Callable[[], Any], seconds: Optional[float]) -> Any:
    """`fun()`, interrupted with `_Timeout` after `seconds` (SIGALRM; main thread only)."""
    import signal
    import threading

    if not seconds or threading.current_thread() is not threading.main_thread():
        return fun()

    def _raise(signum, frame):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fun()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def summarize(
    fixture: Fixture,
    sdfg: dace.SDFG,
    path: Optional[Path] = None,
    *,
    inline_timeout: Optional[float] = 600.0,
) -> dict:
    """The `fixtures.json` entry of one fixture.

    `gt_inline_intermediates` runs on a deep copy, for at most `inline_timeout` seconds; a
    timeout or an exception is recorded in the entry instead of the figures.
    """
    total, accepted = count_stock_inline_fuser(sdfg)
    entry = {
        "file": fixture.file,
        "source": fixture.source,
        "stage": fixture.stage,
        "two_d_transients": count_2d_transients(sdfg),
        "concat_nodes": count_concat_nodes(sdfg),
        "candidate_reads": total,
        "stock_inline_fuser_accepted": accepted,
    }
    try:
        report, _ = _with_timeout(lambda: run_inline_fusion(sdfg), inline_timeout)
    except _Timeout:
        entry["gt_inline_intermediates"] = {"error": f"timeout after {inline_timeout} s"}
        table = entry["gt_inline_intermediates"]["error"]
    except Exception as exc:  # noqa: BLE001 - recorded, the fixture itself is fine
        entry["gt_inline_intermediates"] = {"error": f"{type(exc).__name__}: {exc}"}
        table = entry["gt_inline_intermediates"]["error"]
    else:
        reasons = collections.Counter(r.reason for r in report.declined)
        entry["gt_inline_intermediates"] = {
            "applied": len(report.applied),
            "declined": len(report.declined),
            "copies": report.copies,
            "windowed": len(report.windowed),
            "decline_reasons": dict(sorted(reasons.items())),
        }
        table = report.table()
    if path is not None:
        entry["size_bytes"] = path.stat().st_size
    entry["_report_table"] = table
    return entry


def versions() -> dict[str, str]:
    """Versions of the packages the fixtures were generated with."""
    from importlib import metadata

    result = {}
    for dist in ("gt4py", "dace", "icon4py-common", "icon4py-atmosphere-dycore"):
        try:
            result[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return result


def generate(
    names: Optional[Sequence[str]] = None,
    out_dir: Path = FIXTURE_DIR,
    *,
    verbose: bool = True,
    inline_timeout: Optional[float] = 600.0,
) -> dict[str, dict]:
    """Build, save and summarize the fixtures `names` (all by default).

    `fixtures.json` in `out_dir` is updated: entries of fixtures not rebuilt are kept.
    """
    out_dir = Path(out_dir)
    explicit = bool(names)
    names = list(names or FIXTURES)
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        raise KeyError(f"Unknown fixture(s) {unknown}; known: {list(FIXTURES)}.")

    json_path = out_dir / "fixtures.json"
    summary: dict[str, dict] = {}
    if json_path.exists():
        summary = {e["file"]: e for e in json.loads(json_path.read_text())["fixtures"]}

    for name in names:
        fixture = FIXTURES[name]
        if fixture.needs_icon4py and not icon4py_available():
            if explicit:
                icon4py_program()  # raises the ImportError
            print(f"== {name}: SKIPPED, icon4py (or its dependency cattrs) is not importable")
            continue
        t0 = time.perf_counter()
        sdfg = fixture.build()
        sdfg.validate()
        path = out_dir / fixture.file
        save_sdfg(sdfg, path)
        # Summarize what the file holds (the round trip is also checked this way).
        sdfg = load_fixture(path.name, out_dir)
        sdfg.validate()
        entry = summarize(fixture, sdfg, path, inline_timeout=inline_timeout)
        table = entry.pop("_report_table")
        summary[fixture.file] = entry
        if verbose:
            print(
                f"== {name} ({time.perf_counter() - t0:.1f} s) -> {path} ({entry['size_bytes']} B)"
            )
            for key in (
                "two_d_transients",
                "concat_nodes",
                "candidate_reads",
                "stock_inline_fuser_accepted",
            ):
                print(f"   {key}: {entry[key]}")
            gi = entry["gt_inline_intermediates"]
            if "error" not in gi:
                print(
                    f"   gt_inline_intermediates: applied={gi['applied']} declined={gi['declined']} copies={gi['copies']}"
                    f" windowed={gi['windowed']}"
                )
            print("   " + table.replace("\n", "\n   "))

    order = {FIXTURES[n].file: i for i, n in enumerate(FIXTURES)}
    entries = sorted(summary.values(), key=lambda e: order.get(e["file"], len(order)))
    json_path.write_text(json.dumps({"versions": versions(), "fixtures": entries}, indent=2) + "\n")
    return {e["file"]: e for e in entries}
