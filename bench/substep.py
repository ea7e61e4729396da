#!/usr/bin/env python
"""`make bench-substep`: one dycore substep (icon4py 0.4.1's `SolveNonhydro.time_step`),
stock against the library, program by program and summed over the substep.

    .venv/bin/python bench/substep.py [--layout lam-decomposed] [--cells 20480] [--levels 80]
        [--threads 1] [--rounds N] [--modes default,persistent] [--allocators fresh,glibc]
        [--programs NAME,...] [--substep first|later|both] [--lprep-adv] [--json OUT] [--counts]

Every call the substep makes on the layout (`tools.substep`), each program built static
with its call site's static values (one build per distinct set) three times: stock (icon4py's
own backend factory with `model_options.get_options`' per-program options), a second stock
(the A/A pair) and the library (`integration.icon4py.backend`, as a model run builds). Every allocator
regime runs in a process of its own, pinned before anything is built
(`timing.pin_allocator`: the library's cost model reads the regime), so the library is
built once per regime and stock once per regime process. The substep's time is summed per
round (calls x time of each call site), so it has a per-round ratio and an interval.
`--counts`: instructions and simulated last-level misses instead of times
(`measure/counts.py`), with each call site's compulsory bytes (the limit: every argument
read once, every output written once; `analysis/compulsory.py`, docs/traffic.md) beside
them. `--merge FILES --limits`: the limit added to counts documents that lack it (each
call site lowered again, stock, nothing compiled). docs/substep.md says what is measured
and how to read it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any, Optional


# gt4py's default build settings (a process pool), as a model run builds. A session cache
# (one per process) makes every build translate and compile. `--build-cache DIR` (read here,
# before gt4py is imported) keeps the builds in DIR for a second run; gt4py's cache key sees
# the library's version, sources and settings (integration.identity), and the allocator
# regime the cost model decides by, so a DIR never serves another version's builds.


def _argv_value(flag: str) -> Optional[str]:
    return sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv[:-1] else None


if _argv_value("--build-cache"):
    # One directory per regime (and --decide-as): the cost model decides by the allocator
    # regime, which gt4py's cache key does not see either. Runs 12 and 13 shared one, and their
    # glibc regime timed the fresh-page decisions' builds.
    os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "persistent"
    os.environ["GT4PY_BUILD_CACHE_DIR"] = os.path.join(
        _argv_value("--build-cache"),
        f"{_argv_value('--allocators') or 'parent'}_as_{_argv_value('--decide-as') or 'itself'}",
    )
else:
    os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
    os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/substep_cache_{os.getpid()}")
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
warnings.filterwarnings("ignore", message=r"Library .* already loaded, renaming file")
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings(
    "ignore", message=r"Tried to remove `None` from the (in|out)-connectors"
)  # dace, harmless

import numpy as np  # noqa: E402


HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = pathlib.Path(__file__).resolve()

#: The builds timed, in the order of the first round (`timing.round_order` permutes them).
LABELS = ("stock", "A/A", "library")
#: The builds counted with `--counts`.
COUNT_LABELS = ("stock", "library", "library_gpu_model")


def count_labels(forced: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The builds `--counts` makes: `COUNT_LABELS`, and `library_forced` where `forced`
    (`--force-inline`: the intermediates that build inlines, `policy.InlineOnly`: these and
    nothing else, to check a decision both cost models make against the counts of the build
    that takes the other side) names any."""
    return (*COUNT_LABELS, "library_forced") if forced else COUNT_LABELS


#: Outputs equal: `np.allclose` with this rtol and an atol of rtol x the field's largest value.
RTOL = 1e-12
MODES = ("default", "persistent")
SUBSTEPS = ("first", "later")


def log(msg: str) -> None:
    print(f"[substep {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _names(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


# --- the calls and their builds ---------------------------------------------------------------


def site_static(call: Any, substep: str, layout: Any, n_levels: int, program: Any = None) -> dict:
    """The call site's static values (`SubstepCall.static_values`)."""
    return call.static_values(substep, layout, n_levels, program)


@dataclasses.dataclass
class Site:
    """One distinct build: a program with one set of static values, and the calls of the
    substep(s) it serves (substep -> calls)."""

    key: str
    call: Any  # tools.substep.SubstepCall
    static: dict
    calls: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.call.name


def sites_for(
    layout: Any,
    n_levels: int,
    substeps: list[str],
    *,
    lprep_adv: bool,
    programs: Optional[list[str]] = None,
) -> list[Site]:
    """The distinct builds the substep(s) need, in call order: a call site whose static
    values are the same in the first and the later substep is one build."""
    from gt4py_dace_xforms.tools.static import plain
    from gt4py_dace_xforms.tools.substep import substep_calls

    sites: dict[tuple, Site] = {}
    for call in substep_calls(
        limited_area=layout.limited_area, lprep_adv=lprep_adv, programs=programs
    ):
        program = call.ref.load()
        for substep in substeps:
            n = call.calls(substep)
            if n == 0:
                continue
            static = plain(site_static(call, substep, layout, n_levels, program))
            ident = (call.name, tuple(sorted(static.items())))
            if ident not in sites:
                variant = "" if all(s == substep for s in substeps) else f"[{substep}]"
                sites[ident] = Site(f"{call.name}{variant}", call, static)
            sites[ident].calls[substep] = sites[ident].calls.get(substep, 0) + n
    out = list(sites.values())
    # a build that serves every substep needs no tag
    for s in out:
        if len(s.calls) == len(substeps) and s.key.endswith("]"):
            s.key = s.name
    return out


def make_inputs(
    program: Any, layout: Any, n_levels: int, static: dict, seed: int
) -> tuple[dict, dict]:
    """Keyword arguments and neighbor tables for one call on `layout`: fields sized by the
    layout's grid (every K field with K + 1 levels, room for the half levels), random as
    `measure.census_compare.census_inputs` draws them (floats in [0.5, 1.5), masks 70 %
    true, integer fields 0/1, `k_lev`/`e_lev` the level index, `flat_idx_max` a level, vertical
    offsets 0 on the lowest level),
    float scalars random, integer and boolean scalars the call site's static values; the
    tables those of the generated grid in the layout's order."""
    from gt4py_dace_xforms.measure.census_compare import model_like_fields
    from gt4py_dace_xforms.tools.programs import ICOSAHEDRAL_NEIGHBORS, random_args
    from gt4py_dace_xforms.tools.static_values import static_offset_provider

    sizes = {**layout.sizes, "K": n_levels, **ICOSAHEDRAL_NEIGHBORS}
    args = random_args(
        program,
        sizes,
        seed,
        scalars=static,
        extent=lambda _p, dim, size: size + 1 if dim == "K" else size,
    )
    model_like_fields(args, n_levels, seed, level_offsets=True)
    return args, static_offset_provider(program, layout=layout)


def site_inputs(sites: list[Site], layout: Any, n_levels: int) -> dict[str, tuple[dict, dict]]:
    """`make_inputs` for every site, seeded by the program's position; the sites of one
    program (first and later substep) share its fields and differ in their static scalars."""
    made: dict[str, tuple[dict, dict]] = {}
    out = {}
    for s in sites:
        if s.name not in made:
            made[s.name] = make_inputs(
                s.call.ref.load(), layout, n_levels, s.static, seed=1000 + len(made)
            )
        args, offsets = made[s.name]
        out[s.key] = (
            {**args, **{k: type(args[k])(v) for k, v in s.static.items() if k in args}},
            offsets,
        )
    return out


def _optimization_args(mode: str) -> dict:
    from gt4py.next.program_processors.runners.dace.transformations import TransientMemoryMode

    return {"transient_memory_mode": TransientMemoryMode.PERSISTENT} if mode == "persistent" else {}


def stock_descriptor(program_name: str, mode: str) -> dict:
    """icon4py's own descriptor for the program: its factory and `get_options`."""
    from icon4py.model.common import model_backends, model_options

    extra = {"optimization_args": _optimization_args(mode)} if mode != "default" else {}
    return model_options.get_options(
        program_name,
        backend_factory=model_backends.make_custom_dace_backend,
        device=model_backends.CPU,
        **extra,
    )


def library_descriptor(program_name: str, mode: str, cost_model: Any = None) -> dict:
    """What a model run's `setup_program` makes of the library's descriptor
    (`integration.icon4py.backend`): icon4py's `get_options` tunes it per program as its own."""
    from icon4py.model.common import model_backends, model_options

    from gt4py_dace_xforms.integration.icon4py import backend

    extra: dict[str, Any] = (
        {"optimization_args": _optimization_args(mode)} if mode != "default" else {}
    )
    return model_options.get_options(
        program_name, **backend(model_backends.CPU, policy=cost_model, **extra)
    )


def backend_from(descriptor: dict, postfix: str) -> Any:
    """The backend a descriptor makes, renamed with `postfix` (unique per build)."""
    d = dict(descriptor)
    factory = d.pop("backend_factory")
    backend = factory(**d)
    return dataclasses.replace(backend, name=f"{backend.name}{postfix}")


#: The build configuration (`--config`): "icon4py" (icon4py's backend factory and per-program
#: options, as a model run builds; the default) or "gt4py-default" (gt4py's default dace
#: backend as stock, the library's `backends.make_backend` as the library: horizontal strides
#: not assumed unit, no per-program options).
CONFIGS = ("icon4py", "gt4py-default")
CONFIG = "icon4py"


def gt4py_default_backend(*, transient_memory_mode: Any = None, **_: Any) -> Any:
    """gt4py's default dace CPU backend (`run_dace_cpu`), with the memory mode asked for."""
    import functools

    from gt4py_dace_xforms.integration import compat

    if transient_memory_mode is None:
        return compat.make_dace_toolchain(compat.DaCeConfig(gpu=False, auto_optimize=True))
    return compat.make_dace_toolchain(
        compat.DaCeConfig(gpu=False, auto_optimize=True),
        translation=functools.partial(
            compat.make_dace_translator,
            auto_optimize_args={"transient_memory_mode": transient_memory_mode},
        ),
    )


def library_default_backend(
    *, transient_memory_mode: Any = None, policy: Any = None, **_: Any
) -> Any:
    """The library's `backends.make_backend(False)` (`run_dace_cpu`), with the memory mode
    (and a policy other than the default, for the counts' GPU-model build)."""
    from gt4py_dace_xforms import backends

    return backends.make_backend(False, transient_memory_mode=transient_memory_mode, policy=policy)


def _default_config_descriptor(factory: Any, mode: str) -> dict:
    extra = _optimization_args(mode)
    return {
        "backend_factory": factory,
        **({"transient_memory_mode": extra["transient_memory_mode"]} if extra else {}),
    }


def descriptors(label: str, program_name: str, mode: str, forced: tuple[str, ...] = ()) -> dict:
    if CONFIG == "gt4py-default":
        if label in ("stock", "A/A"):
            return _default_config_descriptor(gt4py_default_backend, mode)
        if label == "library":
            return _default_config_descriptor(library_default_backend, mode)
        if label == "library_gpu_model":
            import gt4py_dace_xforms as gx

            return {
                **_default_config_descriptor(library_default_backend, mode),
                "policy": gx.CostModel(target="gpu"),
            }
        raise ValueError(f"{label}: not built in the gt4py-default configuration")
    if label in ("stock", "A/A"):
        return stock_descriptor(program_name, mode)
    if label == "library":
        return library_descriptor(program_name, mode)
    if label == "library_gpu_model":
        import gt4py_dace_xforms as gx

        return library_descriptor(program_name, mode, cost_model=gx.CostModel(target="gpu"))
    if label == "library_forced":
        from gt4py_dace_xforms.policy import InlineOnly

        return library_descriptor(program_name, mode, cost_model=InlineOnly(intermediates=forced))
    raise ValueError(label)


def describe(descriptor: dict) -> dict:
    """A descriptor in words, for the JSON."""
    out = {}
    for k, v in descriptor.items():
        if k == "optimization_args":
            v = {
                a: (sorted(str(h) for h in b) if a == "optimization_hooks" else str(b))
                for a, b in v.items()
            }
        elif callable(v):
            v = f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', v)}"
        else:
            v = str(v) if not isinstance(v, (bool, int, float, type(None))) else v
        out[k] = v
    return out


def compare(got: dict, ref: dict) -> dict:
    """Every output of `got` against `ref`: max relative difference (max |diff| / max |ref|),
    and whether allclose (rtol `RTOL`, atol `RTOL` x max |ref|)."""
    worst, equal, per = 0.0, True, {}
    for k in ref:
        s, g = ref[k].astype(np.float64), got[k].astype(np.float64)
        d = float(np.nanmax(np.abs(g - s))) if s.size else 0.0
        scale = float(np.nanmax(np.abs(s))) if s.size else 0.0
        rel = d / scale if scale else d
        ok = bool(np.allclose(g, s, rtol=RTOL, atol=RTOL * scale, equal_nan=True))
        per[k] = {
            "max_rel_diff": rel,
            "equal": ok,
            "bitwise": bool(np.array_equal(g, s, equal_nan=True)),
        }
        worst, equal = max(worst, rel), equal and ok
    return {"max_rel_diff": worst, "equal": equal, "outputs": per}


# --- timing (one regime, in its own process) --------------------------------------------------


def _interval(values: list[float]) -> dict:
    from gt4py_dace_xforms.measure.timing import median_interval

    return dataclasses.asdict(median_interval(values))


def _judge(seconds: dict[str, list[float]]) -> dict:
    """Per-round seconds of the three builds: medians, ratio intervals, floor, verdict."""
    from gt4py_dace_xforms.measure.timing import Timing, noise_floor, verdict

    timing = {
        label: Timing(label, tuple(seconds[label]), tuple(seconds["stock"])) for label in LABELS
    }
    v = verdict(timing["library"].ratio, timing["A/A"].ratio)
    return {
        "median_ms": {label: t.median_ms for label, t in timing.items()},
        "ratio": {label: dataclasses.asdict(timing[label].ratio) for label in ("A/A", "library")},
        "floor": v.floor,
        "aa_reach": noise_floor(timing["A/A"].ratio, minimum=0.0),
        "verdict": v.word,
        "verdict_text": v.text(),
        "times_ms": {label: [round(1e3 * x, 4) for x in seconds[label]] for label in LABELS},
    }


def _extend_undecided(
    opts: argparse.Namespace, seconds: dict, one_round, batch: int, note
) -> dict[str, float]:
    """More rounds, `batch` at a time, for the call sites whose library interval straddles an
    edge of the A/A floor after the common rounds, while `may_extend` allows (each site's
    extra timing within `opts.extend_budget` seconds, at most `opts.extend_cap` rounds in
    all). Not for a "no difference" against a wide floor (`measure.timing.undecided`'s other
    case, which `make bench` extends): on this machine a millisecond program's build lands
    in memory where it lands for the whole process, and timed on alone for 216 rounds
    `compute_hydrostatic_correction_term`, whose library build has stock's instructions and
    misses exactly, read 1.127 [1.055..1.242] of stock, "slower" (run 12). The substep rows
    use the common rounds only. Returns the seconds each extended site spent."""
    from gt4py_dace_xforms.measure.timing import Timing, may_extend, noise_floor

    def open_keys() -> list[str]:
        out = []
        for key, secs in seconds.items():
            t = {label: Timing(label, tuple(secs[label]), tuple(secs["stock"])) for label in LABELS}
            lib, floor = t["library"].ratio, noise_floor(t["A/A"].ratio)
            if any(lib.lo < edge < lib.hi for edge in (1.0 - floor, 1.0 + floor)):
                out.append(key)
        return out

    spent: dict[str, float] = {}
    cap = opts.extend_cap if opts.extend_cap is not None else 4 * opts.rounds
    keys = open_keys()
    if keys:
        note(f"undecided after {opts.rounds} rounds: {', '.join(keys)}")
    while keys:
        go = [
            k
            for k in keys
            if may_extend(
                len(seconds[k]["stock"]),
                batch,
                opts.rounds,
                spent_s=spent.get(k, 0.0),
                budget_s=opts.extend_budget,
                cap_rounds=cap,
            )
        ]
        if not go:
            break
        for k in go:
            t = time.perf_counter()
            for _ in range(batch):
                one_round(len(seconds[k]["stock"]), [k])
            spent[k] = spent.get(k, 0.0) + time.perf_counter() - t
        keys = [k for k in open_keys() if k in go]
    for k, s in spent.items():
        note(f"  {k}: {len(seconds[k]['stock'])} rounds ({s:.0f} s more)")
    return spent


def build_site(
    site: Site,
    labels: tuple[str, ...],
    mode: str,
    tag: str,
    inputs: tuple[dict, dict],
    forced: tuple[str, ...] = (),
) -> dict:
    """Compile every build of `site` (static, as `setup_program` does) and call it once on
    a copy of the inputs: (label -> compiled program, first-call seconds, outputs);
    `forced`: what a `library_forced` build inlines (`descriptors`)."""
    from gt4py_dace_xforms.tools.programs import copy_args, program_outputs
    from gt4py_dace_xforms.tools.static import compile_static

    program = site.call.ref.load()
    args, offsets = inputs
    outputs = program_outputs(program)
    out = {"runs": {}, "first_call_s": {}, "outputs": {}, "descriptors": {}}
    for label in labels:
        desc = descriptors(label, site.name, mode, forced)
        out["descriptors"][label] = describe(desc)
        postfix = f"_substep_{tag}_{label.replace('/', '')}"
        t0 = time.perf_counter()
        run = compile_static(program, backend_from(desc, postfix), site.static, offsets)
        a = copy_args(args)
        run(**a, offset_provider=offsets)
        out["first_call_s"][label] = time.perf_counter() - t0
        out["runs"][label] = run
        out["outputs"][label] = {k: a[k].asnumpy() for k in outputs}
        log(
            f"  {site.key} [{mode}] {label}: compiled and run in {out['first_call_s'][label]:.1f} s"
        )
    return out


def time_regime(opts: argparse.Namespace, regime: str) -> dict:
    """The timing of one allocator regime (this process pins it): every mode's builds,
    outputs compared, `opts.rounds` rounds over all call sites."""
    from gt4py_dace_xforms.measure.timing import (
        compiled_sdfgs,
        omp_threads,
        reallocation_faults_per_mib,
        replace_persistent,
        reset_fields,
        round_order,
    )  # fmt: skip
    from gt4py_dace_xforms.tools.layouts import layout as make_layout
    from gt4py_dace_xforms.tools.programs import copy_args

    lay = make_layout(opts.layout, opts.cells)
    sites = sites_for(
        lay, opts.levels, opts.substeps, lprep_adv=opts.lprep_adv, programs=opts.programs or None
    )
    log(
        f"{regime}: {len(sites)} builds per label for {len(opts.substeps)} substep(s): "
        + ", ".join(f"{s.key} x{s.calls}" for s in sites)
    )
    inputs = site_inputs(sites, lay, opts.levels)
    fields = {id(v): v for a, _ in inputs.values() for v in a.values() if hasattr(v, "ndarray")}
    mib = sum(v.ndarray.nbytes for v in fields.values())
    log(f"{regime}: inputs made ({mib / 2**20:.0f} MiB of fields)")
    result: dict[str, Any] = {"regime": regime, "modes": {}}
    for mode in opts.modes:
        t_build = time.perf_counter()
        built = {}
        for s in sites:
            built[s.key] = build_site(s, LABELS, mode, f"{regime}_{mode}", inputs[s.key])
        build_s = time.perf_counter() - t_build
        got = omp_threads(opts.threads)
        calls = {
            key: {
                label: (lambda a, run=run, off=inputs[key][1]: run(**a, offset_provider=off))
                for label, run in b["runs"].items()
            }
            for key, b in built.items()
        }
        # untimed warm-up at this thread count; it finds the compiled SDFGs (persistent transients)
        handles = {
            key: [
                h
                for c in cs.values()
                for h in compiled_sdfgs(lambda c=c, key=key: c(copy_args(inputs[key][0])))
            ]
            for key, cs in calls.items()
        }
        batch = 2 * len(LABELS)
        seconds = {key: {label: [] for label in LABELS} for key in calls}

        # this mode's builds and samples bound now (the loop rebinds the names for the next mode)
        def one_round(
            r: int,
            keys,
            mode=mode,
            batch=batch,
            handles=handles,
            calls=calls,
            seconds=seconds,
        ) -> None:
            if mode == "persistent" and r and r % batch == 0:
                # every batch on newly allocated persistent transients, touched by an untimed call
                for key in keys:
                    replace_persistent(handles[key])
                    for c in calls[key].values():
                        c(copy_args(inputs[key][0]))
            for key in keys:
                cs, args = calls[key], inputs[key][0]
                shared = copy_args(args)
                for label in round_order(list(LABELS), r):
                    reset_fields(shared, args)
                    t = time.perf_counter()
                    cs[label](shared)
                    seconds[key][label].append(time.perf_counter() - t)
                del shared

        t0 = time.perf_counter()
        for r in range(opts.rounds):
            one_round(r, list(calls))
            if r == 0 or (r + 1) % max(1, opts.rounds // 6) == 0 or r + 1 == opts.rounds:
                log(
                    f"{regime} [{mode}]: round {r + 1}/{opts.rounds} ({time.perf_counter() - t0:.0f} s)"
                )
        extended = _extend_undecided(
            opts, seconds, one_round, batch, lambda msg, mode=mode: log(f"{regime} [{mode}]: {msg}")
        )
        span = time.perf_counter() - t0
        rows = []
        for s in sites:
            b = built[s.key]
            row = {
                "key": s.key,
                "program": s.name,
                "module": s.call.ref.module,
                "step": s.call.step,
                "calls": s.calls,
                "static": s.static,
                "first_call_s": b["first_call_s"],
                "descriptors": b["descriptors"],
                "library_vs_stock": compare(b["outputs"]["library"], b["outputs"]["stock"]),
                "aa_vs_stock": compare(b["outputs"]["A/A"], b["outputs"]["stock"]),
                "rounds": len(seconds[s.key]["stock"]),
                "extended_s": extended.get(s.key, 0.0),
                **_judge(seconds[s.key]),
            }
            rows.append(row)
        substeps = {}
        for sub in opts.substeps:
            per_round = {
                label: [
                    sum(s.calls.get(sub, 0) * seconds[s.key][label][r] for s in sites)
                    for r in range(opts.rounds)
                ]
                for label in LABELS
            }
            substeps[sub] = {
                "calls": sum(s.calls.get(sub, 0) for s in sites),
                "programs": [s.key for s in sites if s.calls.get(sub)],
                **_judge(per_round),
            }
        faults = round(reallocation_faults_per_mib(), 1)
        result["modes"][mode] = {
            "threads": got,
            "rounds": opts.rounds,
            "span_s": round(span, 1),
            "build_s": round(build_s, 1),
            "faults_per_mib": faults,
            "rows": rows,
            "substeps": substeps,
        }
        for s in sites:  # free this mode's builds before the next mode's
            built[s.key]["outputs"].clear()
        del built, calls, handles
    return result


# --- counts (one regime, in its own process) --------------------------------------------------


def count_regime(opts: argparse.Namespace, regime: str) -> dict:
    """Instructions and simulated last-level misses of one call of every build
    (`count_labels()`), per site and calls-weighted over the substep(s)."""
    from concurrent.futures import ThreadPoolExecutor

    from gt4py_dace_xforms.measure import counts
    from gt4py_dace_xforms.tools.layouts import layout as make_layout
    from gt4py_dace_xforms.tools.programs import copy_args
    from gt4py_dace_xforms.tools.static import compile_static

    if counts.valgrind() is None:
        raise RuntimeError("--counts needs valgrind")
    lay = make_layout(opts.layout, opts.cells)
    sites = sites_for(
        lay, opts.levels, opts.substeps, lprep_adv=opts.lprep_adv, programs=opts.programs or None
    )
    work = pathlib.Path(tempfile.mkdtemp(prefix="substep_counts_"))
    pool = ThreadPoolExecutor(max_workers=2)
    by_code: dict = {}

    def count_all(folders: list) -> dict:
        """Both caches' summed events of the captured calls; then their data is deleted
        (a full-size capture holds every input field: about 1 GB)."""
        out = {}
        try:
            for cache in counts.CACHES:
                totals: dict = {}
                for folder in folders:
                    for k, v in counts.count_call(folder, cache).events.items():
                        totals[k] = totals.get(k, 0) + v
                out[cache] = totals
        finally:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
        return out

    rows = []
    forced = tuple(opts.force_inline or ())
    labels = count_labels(forced)
    mode = opts.modes[0]
    inputs = site_inputs(sites, lay, opts.levels)
    for s in sites:
        program = s.call.ref.load()
        args, offsets = inputs[s.key]
        row = {"key": s.key, "program": s.name, "calls": s.calls, "static": s.static, "builds": {}}
        for label in labels:
            desc = descriptors(label, s.name, mode, forced)
            t0 = time.perf_counter()
            run = compile_static(
                program, backend_from(desc, f"_substep_counts_{regime}_{label}"), s.static, offsets
            )
            a = copy_args(args)
            run(**a, offset_provider=offsets)
            compile_s = time.perf_counter() - t0
            a = copy_args(args)  # the captured call's fields: their extents (`counts.capture_call`)
            buffers = [v.ndarray for v in [*a.values(), *offsets.values()] if hasattr(v, "ndarray")]
            folders = counts.capture_call(
                lambda run=run, a=a, offsets=offsets: run(**a, offset_provider=offsets),
                work / s.key.replace("[", "_").replace("]", "") / label,
                buffers,
            )
            ident = (
                s.key,
                tuple(json.loads((f / "call.json").read_text())["code_hash"] for f in folders),
            )
            entry = {"compile_s": compile_s, "sdfg_calls": len(folders)}
            if ident in by_code:  # the same code on the same inputs: the same counts
                entry["same_code_as"] = by_code[ident][1]
                job = by_code[ident][0]
                for folder in folders:
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                job = pool.submit(count_all, folders)
                by_code[ident] = (job, label)
            entry["job"] = job
            row["builds"][label] = entry
            log(
                f"  {s.key} {label}: built and captured in {compile_s:.0f} s"
                + (f" (the code of {entry['same_code_as']})" if "same_code_as" in entry else "")
            )
        row["limit"] = site_limit(s.name, s.static, lay, opts.levels)
        rows.append(row)
        _write_partial(rows, pathlib.Path(f"{opts.child}.partial"))
    for row in rows:
        for entry in row["builds"].values():
            entry.update(entry.pop("job").result())
            entry["figures"] = count_figures(entry)
        log(
            f"  {row['key']}: "
            + ", ".join(
                f"{label} Ir {e['figures']['instructions']:,}" for label, e in row["builds"].items()
            )
        )
    pool.shutdown()
    shutil.rmtree(work, ignore_errors=True)
    substeps = {}
    for sub in opts.substeps:
        total = {
            label: {
                f: sum(r["calls"].get(sub, 0) * r["builds"][label]["figures"][f] for r in rows)
                for f in FIGURES
            }
            for label in labels
        }
        substeps[sub] = {
            "calls": sum(r["calls"].get(sub, 0) for r in rows),
            "builds": total,
            **substep_limit(rows, sub),
        }
    return {
        "regime": regime,
        "mode": mode,
        "rows": rows,
        "substeps": substeps,
        **({"forced": list(forced)} if forced else {}),
    }


def site_limit(program_name: str, static: dict, layout: Any, n_levels: int) -> dict:
    """The compulsory traffic of one call of a call site (`tools.traffic.program_limit`):
    stock's build lowered static with the site's values (nothing compiled), gt4py's
    argument ranges at the layout's sizes and `n_levels` levels."""
    from gt4py_dace_xforms.tools import traffic
    from gt4py_dace_xforms.tools.static_values import static_offset_provider
    from gt4py_dace_xforms.tools.substep import substep_calls

    calls = substep_calls(limited_area=layout.limited_area, lprep_adv=True)
    call = next(c for c in calls if c.name == program_name)
    program = call.ref.load()
    sdfg = traffic.lower(
        traffic.stock_translator(program_name, False, []),
        program,
        static_offset_provider(program, layout=layout),
        static,
    )
    return traffic.program_limit(sdfg, {**layout.sizes, "K": n_levels})


def add_limits(doc: dict) -> None:
    """Each row of a counts document without its limit gets it (`site_limit`), and the
    substep rows theirs."""
    from gt4py_dace_xforms.tools.layouts import layout as make_layout

    meta, res = doc["meta"], doc["counts"]
    lay = make_layout(meta["layout"], meta["cells"])
    for row in res["rows"]:
        if "limit" not in row:
            t0 = time.perf_counter()
            row["limit"] = site_limit(row["program"], row["static"], lay, meta["levels"])
            log(
                f"  {row['key']}: limit {row['limit']['bytes'] / 1e6:.1f} MB "
                f"({time.perf_counter() - t0:.0f} s)"
            )
    for sub, t in res["substeps"].items():
        t.update(substep_limit(res["rows"], sub))


def substep_limit(rows: list[dict], sub: str) -> dict:
    """The substep's compulsory bytes and fill bytes (calls x each site's), where every row
    has its limit; {} otherwise."""
    if not rows or any("limit" not in r for r in rows):
        return {}
    return {
        "limit": {
            k: sum(r["calls"].get(sub, 0) * r["limit"].get(k, 0) for r in rows)
            for k in ("bytes", "fill_bytes", "read_bytes", "written_bytes", "upper_bound_bytes")
        }
    }


def _write_partial(rows: list[dict], path: pathlib.Path) -> None:
    """The rows whose replays have finished, so far (a run cut short keeps them)."""
    done = []
    for row in rows:
        if all(e["job"].done() and not e["job"].exception() for e in row["builds"].values()):
            builds = {
                label: {**{k: v for k, v in e.items() if k != "job"}, **e["job"].result()}
                for label, e in row["builds"].items()
            }
            for e in builds.values():
                e["figures"] = count_figures(e)
            done.append({**row, "builds": builds})
    path.write_text(json.dumps(done, default=str))


FIGURES = ("instructions", "ll_misses_cpu", "ll_misses_gpu")


def _ll(events: dict) -> int:
    return events.get("DLmr", 0) + events.get("DLmw", 0) + events.get("ILmr", 0)


def count_figures(entry: dict) -> dict:
    return {
        "instructions": entry["cpu"]["Ir"],
        "ll_misses_cpu": _ll(entry["cpu"]),
        "ll_misses_gpu": _ll(entry["gpu"]),
    }


def merge_counts(docs: list[dict], sources: list[str]) -> dict:
    """One counts document from several (`--merge`): the rows of every document, a later
    document's row replacing an earlier one's of the same call site (a program recounted
    after a change), and the substep sums recomputed from the merged rows. The documents
    must count the same layout, sizes, levels, regime and memory mode; `sources` (their
    paths) and each one's date, argv and rows go into the merged meta, so the table says
    which rows come from which run."""
    if not docs:
        raise ValueError("--merge needs at least one counts JSON")
    keys = ("layout", "sizes", "levels")
    first = docs[0]
    for doc, src in zip(docs, sources):
        if not doc.get("counts"):
            raise ValueError(f"{src} is not a counts document (no 'counts')")
        if any(doc["meta"].get(k) != first["meta"].get(k) for k in keys) or (
            doc["counts"]["regime"],
            doc["counts"]["mode"],
        ) != (first["counts"]["regime"], first["counts"]["mode"]):
            raise ValueError(
                f"{src} counts another configuration than {sources[0]} (layout, sizes, levels, regime, mode)"
            )

    def build_id(row: dict) -> str:  # one build: the program with its static values
        return json.dumps([row["program"], row["static"]], sort_keys=True, default=str)

    rows: dict[str, dict] = {}
    for doc in docs:
        for row in doc["counts"]["rows"]:
            old = rows.get(build_id(row))
            # A recount keeps the call site's name and calls (a run of one substep names its
            # sites without [first]/[later] and counts only that substep's calls).
            rows[build_id(row)] = (
                row if old is None else {**row, "key": old["key"], "calls": old["calls"]}
            )
    merged = list(rows.values())
    subs = [
        sub
        for sub in SUBSTEPS
        if any(sub in doc["counts"]["substeps"] for doc in docs)
        or any(r["calls"].get(sub) for r in merged)
    ]
    substeps = {}
    for sub in subs:
        total = {
            label: {
                f: sum(r["calls"].get(sub, 0) * r["builds"][label]["figures"][f] for r in merged)
                for f in FIGURES
            }
            for label in COUNT_LABELS
        }
        substeps[sub] = {
            "calls": sum(r["calls"].get(sub, 0) for r in merged),
            "builds": total,
            **substep_limit(merged, sub),
        }
    meta = {
        k: first["meta"].get(k)
        for k in (
            "layout",
            "limited_area",
            "cells",
            "sizes",
            "levels",
            "threads",
            "modes",
            "allocators",
            "gt4py",
            "dace",
        )
    }
    meta["merged_from"] = [
        {
            "path": src,
            "date": doc["meta"].get("date"),
            "argv": doc["meta"].get("argv"),
            "rows": [
                r["key"]
                for r in doc["counts"]["rows"]
                if any(m["builds"] is r["builds"] for m in merged)
            ],
        }
        for doc, src in zip(docs, sources)
    ]
    return {
        "meta": meta,
        "counts": {
            "regime": first["counts"]["regime"],
            "mode": first["counts"]["mode"],
            "rows": merged,
            "substeps": substeps,
        },
    }


# --- tables -----------------------------------------------------------------------------------


def _iv(d: dict) -> str:
    return f"{d['median']:.3f} [{d['lo']:.3f}..{d['hi']:.3f}]"


def _short(word: str) -> str:
    return {"no measurable difference": "no difference"}.get(word, word)


def timing_table(doc: dict) -> str:
    lines = []
    meta = doc["meta"]
    for res in doc["regimes"]:
        for mode, m in res["modes"].items():
            decided = (
                f" (library decided as under {meta['decide_as']})" if meta.get("decide_as") else ""
            )
            lines.append(
                f"\n== allocator {res['regime']}{decided}, mode {mode}: {meta['layout']} {meta['sizes']}, "
                f"{meta['levels']} levels, {m['threads']} thread(s), {m['rounds']} rounds over "
                f"{m['span_s']} s, builds {m['build_s']} s, {m['faults_per_mib']} faults/MiB"
            )
            w = max([len(r["key"]) for r in m["rows"]] + [len("substep (later)")])
            cols = "  ".join(f"{s[:5]:>5}" for s in meta["substeps"])
            head = (
                f"{'program':<{w}}  {cols}  stock ms  library/stock            A/A                      "
                f"floor   verdict          outputs"
            )
            lines += [head, "-" * len(head)]
            for r in m["rows"]:
                calls = "  ".join(f"{r['calls'].get(s, 0):>5}" for s in meta["substeps"])
                cmp = r["library_vs_stock"]
                out = "equal" if cmp["equal"] else "DIFFER"
                out += f" {cmp['max_rel_diff']:.1e}"
                more = (
                    f"  ({r['rounds']} rounds)"
                    if r.get("rounds", m["rounds"]) != m["rounds"]
                    else ""
                )
                lines.append(
                    f"{r['key']:<{w}}  {calls}  {r['median_ms']['stock']:8.2f}  "
                    f"{_iv(r['ratio']['library']):<23}  {_iv(r['ratio']['A/A']):<23}  "
                    f"±{100 * r['floor']:4.1f}%  {_short(r['verdict']):<15}  {out}{more}"
                )
            lines.append("-" * len(head))
            for sub, t in m["substeps"].items():
                label = f"substep ({sub})"
                calls = "  ".join(f"{t['calls'] if s == sub else '':>5}" for s in meta["substeps"])
                lines.append(
                    f"{label:<{w}}  {calls}  {t['median_ms']['stock']:8.2f}  "
                    f"{_iv(t['ratio']['library']):<23}  {_iv(t['ratio']['A/A']):<23}  "
                    f"±{100 * t['floor']:4.1f}%  {_short(t['verdict'])}"
                )
    lines.append(
        "\nstock ms: median ms per call of stock (per substep for the substep rows: the sum over its "
        "calls of calls x time, per round); library/stock and A/A (second stock / stock): median of "
        "the per-round ratios [95 % interval]; floor: how far the A/A interval reaches from 1, at least "
        "3 %; verdict: faster/slower only when the whole interval lies beyond the floor; outputs: the "
        "library's against stock's on the same inputs (max relative difference); (N rounds): a call site "
        "whose interval straddled an edge of the floor after the common rounds, timed on alone "
        "(--extend-budget; the substep rows use the common rounds)"
    )
    return "\n".join(lines)


def counts_table(doc: dict) -> str:
    res = doc["counts"]
    lines = [
        f"== counts: allocator {res['regime']}, mode {res['mode']}, {doc['meta']['layout']} "
        f"{doc['meta']['sizes']}, {doc['meta']['levels']} levels (one call per build, callgrind)"
    ]
    w = max([len(r["key"]) for r in res["rows"]] + [len("substep (later)")])
    labels = tuple(res["rows"][0]["builds"]) if res["rows"] else COUNT_LABELS
    b = max(len(x) for x in labels)
    head = (
        f"{'program':<{w}}  {'build':<{b}}  {'instructions':>15}  /stock  {'LL miss cpu':>11}  /stock  "
        f"{'LL miss gpu':>11}  /stock"
    )
    lines += [head, "-" * len(head)]

    def add(name: str, figs: dict) -> None:
        base = figs["stock"]
        for label in labels:
            f = figs[label]
            lines.append(
                f"{name:<{w}}  {label:<{b}}  {f['instructions']:>15,}  "
                f"{f['instructions'] / max(base['instructions'], 1):6.3f}  {f['ll_misses_cpu']:>11,}  "
                f"{f['ll_misses_cpu'] / max(base['ll_misses_cpu'], 1):6.3f}  {f['ll_misses_gpu']:>11,}  "
                f"{f['ll_misses_gpu'] / max(base['ll_misses_gpu'], 1):6.3f}"
            )

    for r in res["rows"]:
        add(r["key"], {label: e["figures"] for label, e in r["builds"].items()})
    lines.append("-" * len(head))
    for sub, t in res["substeps"].items():
        add(f"substep ({sub})", t["builds"])
    lines.append(
        "one call of each build replayed under callgrind (measure/counts.py): instructions of the SDFG's "
        "program function, one thread; LL misses: simulated last level (cpu: 32 MiB 16-way 64 B; gpu: "
        "48 MiB 12-way 128 B), inputs evicted first. library_gpu_model: the library with "
        "CostModel('gpu'), compiled for the CPU. substep rows: calls x counts summed over its calls"
        + (
            f". library_forced: the library inlining {', '.join(res['forced'])} and nothing else "
            "(policy.InlineOnly)"
            if res.get("forced")
            else ""
        )
    )
    if all("limit" in r for r in res["rows"]) and res["rows"]:
        lines += ["", *limit_table(res, w, b, labels)]
    return "\n".join(lines)


#: Line bytes of the simulated last levels (`measure.counts.CACHES`).
LINE_BYTES = {"cpu": 64, "gpu": 128}


def limit_table(res: dict, w: int, b: int, labels: tuple[str, ...] = COUNT_LABELS) -> list[str]:
    """Per call site and substep: the compulsory bytes beside each build's simulated
    last-level traffic (misses x line), and the ratios."""
    lines = [
        "== the limit: compulsory bytes (every argument read once, every output written once; "
        "analysis/compulsory.py) beside the simulated last-level traffic, MB per call (substep: "
        "calls x per call)"
    ]
    head = (
        f"{'program':<{w}}  {'build':<{b}}  {'limit MB':>9}  {'upper MB':>9}  {'fills MB':>9}  {'LL cpu MB':>9}  "
        f"{'/limit':>6}  {'/fills':>6}  {'LL gpu MB':>9}  {'/limit':>6}  {'/fills':>6}"
    )
    lines += [head, "-" * len(head)]

    def add(name: str, figs: dict, limit: dict) -> None:
        for label in labels:
            f = figs[label]
            cpu = f["ll_misses_cpu"] * LINE_BYTES["cpu"]
            gpu = f["ll_misses_gpu"] * LINE_BYTES["gpu"]
            lim, fills = max(limit["bytes"], 1), max(limit["fill_bytes"], 1)
            lines.append(
                f"{name:<{w}}  {label:<{b}}  {limit['bytes'] / 1e6:9.2f}  "
                f"{limit.get('upper_bound_bytes', 0) / 1e6:9.2f}  {limit['fill_bytes'] / 1e6:9.2f}  "
                f"{cpu / 1e6:9.2f}  {cpu / lim:6.2f}  {cpu / fills:6.2f}  {gpu / 1e6:9.2f}  "
                f"{gpu / lim:6.2f}  {gpu / fills:6.2f}"
            )

    for r in res["rows"]:
        add(r["key"], {label: e["figures"] for label, e in r["builds"].items()}, r["limit"])
    lines.append("-" * len(head))
    for sub, t in res["substeps"].items():
        if "limit" in t:
            add(f"substep ({sub})", t["builds"], t["limit"])
    lines.append(
        "limit: the read regions plus the written regions of the call's arguments (a field updated "
        "in place counts twice); upper: of it, arrays whose read box is an upper bound of what they "
        "touch (a dynamic memlet: a neighbor table, an offset field, a where branch); fills: their union (each line brought in once, read or written: the "
        "floor of callgrind's misses, which count no write-back); LL MB: last-level misses x line "
        "(cpu 64 B, gpu 128 B), instruction misses included (docs/traffic.md)"
    )
    return lines


# --- driver -----------------------------------------------------------------------------------


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    from gt4py_dace_xforms.measure.timing import ALLOCATORS
    from gt4py_dace_xforms.tools.layouts import LAYOUTS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--layout",
        default="lam-decomposed",
        choices=tuple(LAYOUTS),
        help="index layout (tools/layouts.py; default lam-decomposed, a production run's rank)",
    )
    p.add_argument(
        "--cells", type=int, default=20480, help="cells of the generated grid (default 20480)"
    )
    p.add_argument("--levels", type=int, default=80, help="full levels (default 80)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP threads (default 1)")
    p.add_argument(
        "--rounds",
        type=int,
        default=12,
        help="rounds; every build of every call site once per round (default 12, a multiple of 6)",
    )
    p.add_argument(
        "--build-cache",
        default=None,
        metavar="DIR",
        help="keep the builds in DIR (persistent) for another run of the same library version; "
        "gt4py's cache key does not see the library's code: never share DIR across versions",
    )
    p.add_argument(
        "--extend-budget",
        type=float,
        default=120.0,
        help="seconds of extra timing per call site whose verdict the rounds leave undecided (default 120; "
        "0: no extension)",
    )
    p.add_argument(
        "--extend-cap",
        type=int,
        default=None,
        help="most rounds in all for an extended call site (default 4 x --rounds)",
    )
    p.add_argument(
        "--modes",
        default="default",
        help="comma-separated: default (gt4py's per-call transients), "
        "persistent (TransientMemoryMode.PERSISTENT) (default: default)",
    )
    p.add_argument(
        "--allocators",
        default="fresh,glibc",
        help=f"comma-separated allocator regimes ({', '.join(ALLOCATORS)}), one process each, pinned "
        "before the builds (default fresh,glibc)",
    )
    p.add_argument(
        "--programs",
        default="",
        help="comma-separated program names (default: every call of the substep)",
    )
    p.add_argument(
        "--substep",
        default="both",
        choices=("first", "later", "both"),
        help="the first substep of a time step, a later one, or both (default both)",
    )
    p.add_argument(
        "--lprep-adv",
        action="store_true",
        help="tracer transport on (two more limited-area programs)",
    )
    p.add_argument(
        "--json", default=None, help="write everything here as JSON, the table next to it as .txt"
    )
    p.add_argument(
        "--counts",
        action="store_true",
        help="instructions and simulated last-level misses (callgrind) instead of times: stock, the "
        "library, the library with the GPU cost model; first allocator and first mode only",
    )
    p.add_argument(
        "--decide-as",
        default=None,
        choices=tuple(ALLOCATORS),
        help="the library's cost model decides as under this allocator regime, whichever regime is "
        "timed (an experiment: do the decisions of one regime pay in the other?)",
    )
    p.add_argument(
        "--force-inline",
        type=lambda v: [x for x in v.split(",") if x],
        default=None,
        metavar="NAMES",
        help="with --counts (icon4py configuration): a fourth build, library_forced, inlining these "
        "intermediates and nothing else (policy.InlineOnly), to count a decision's other side",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="COUNTS_JSON",
        help="build nothing: merge these --counts JSON files (a later file's row replaces an earlier "
        "one's of the same call site) and print the table with the substep recomputed; --json "
        "writes the result",
    )
    p.add_argument(
        "--limits",
        action="store_true",
        help="with --merge: add each call site's compulsory bytes where a document lacks them (stock "
        "lowered static at the documents' layout, cells and levels; nothing compiled)",
    )
    p.add_argument(
        "--config",
        default="icon4py",
        choices=CONFIGS,
        help="icon4py: icon4py's backend factory and per-program options on both sides (a model run's "
        "builds; default). gt4py-default: gt4py's default dace backend as stock, the library's "
        "run_dace_cpu (horizontal strides not assumed unit)",
    )
    p.add_argument(
        "--child", default=None, help=argparse.SUPPRESS
    )  # internal: one regime, JSON to this path
    opts = p.parse_args(argv)
    opts.modes = _names(opts.modes)
    if bad := [m for m in opts.modes if m not in MODES]:
        p.error(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    opts.allocators = _names(opts.allocators)
    if bad := [a for a in opts.allocators if a not in ALLOCATORS]:
        p.error(f"unknown allocator regime(s) {bad}; choose from {', '.join(ALLOCATORS)}")
    if not opts.modes or not opts.allocators:
        p.error("at least one mode and one allocator regime")
    opts.programs = _names(opts.programs)
    opts.substeps = list(SUBSTEPS) if opts.substep == "both" else [opts.substep]
    if opts.counts:
        opts.allocators = opts.allocators[:1]
    if opts.force_inline is not None and not (opts.counts and opts.config == "icon4py"):
        p.error("--force-inline needs --counts in the icon4py configuration")
    return opts


def child(opts: argparse.Namespace) -> int:
    """One regime in this process: pinned first, then built, timed or counted."""
    from gt4py_dace_xforms.measure import counts
    from gt4py_dace_xforms.measure.timing import pin_allocator

    regime = opts.allocators[0]
    pin_allocator(regime)  # before anything is built: the cost model reads it
    if opts.decide_as:
        from gt4py_dace_xforms.measure.timing import regime_page_bytes
        from gt4py_dace_xforms.policy import allocator

        allocator.set_fresh_page_bytes(regime_page_bytes(opts.decide_as))
    if opts.counts:
        os.environ["CXXFLAGS"] = counts.COUNT_CXXFLAGS  # valgrind cannot decode AVX-512
        result = count_regime(opts, regime)
    else:
        result = time_regime(opts, regime)
    pathlib.Path(opts.child).write_text(json.dumps(result, default=str))
    return 0


def run_child(
    args: list[str],
    out: pathlib.Path,
    what: str,
    env: Optional[dict] = None,
    say: Callable[[str], None] = log,
) -> Optional[dict]:
    """Run this script's (or bench/model.py's) process for one regime: the JSON document it
    wrote to `out`, or None where it failed (said with `what`, the regime's name)."""
    done = subprocess.run([sys.executable, *args], env=env)
    if done.returncode != 0 or not out.exists():
        say(f"{what}: the process failed (exit {done.returncode})")
        return None
    return json.loads(out.read_text())


def _child_argv(argv: list[str], regime: str, out: str) -> list[str]:
    """`argv` with --allocators set to `regime`, --json dropped, --child out added."""
    keep, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--allocators", "--json"):
            skip = True
            continue
        if a.startswith(("--allocators=", "--json=")):
            continue
        keep.append(a)
    return [*keep, "--allocators", regime, "--child", out]


def _write(doc: dict, text: str, json_path: str) -> None:
    """`doc` (with `text` as its "table") to `json_path`, and `text` next to it as .txt."""
    path = pathlib.Path(json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc["table"] = text
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    path.with_suffix(".txt").write_text(text + "\n")
    log(f"written {path} and {path.with_suffix('.txt')}")


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse(argv)
    global CONFIG
    CONFIG = opts.config
    if opts.child:
        return child(opts)
    if opts.merge:
        doc = merge_counts(
            [json.loads(pathlib.Path(f).read_text()) for f in opts.merge], opts.merge
        )
        if opts.limits:
            add_limits(doc)
        text = (
            counts_table(doc)
            + "\n\nmerged from "
            + "; ".join(
                f"{m['path']} ({m['date']}): {', '.join(m['rows']) or 'no rows kept'}"
                for m in doc["meta"]["merged_from"]
            )
        )
        print(text, flush=True)
        if opts.json:
            _write(doc, text, opts.json)
        return 0
    from gt4py_dace_xforms.tools.layouts import layout as make_layout

    lay = make_layout(opts.layout, opts.cells)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    log(
        f"{'counts' if opts.counts else 'timing'}: layout {opts.layout} ({lay.sizes}), {opts.levels} levels, "
        f"{opts.threads} thread(s), {opts.rounds} rounds, modes {opts.modes}, allocators {opts.allocators}, "
        f"substep(s) {opts.substeps}; load {load_before[0]:.2f}"
    )
    results, failed = [], []
    with tempfile.TemporaryDirectory(prefix="substep_") as tmp:
        for regime in opts.allocators:
            out = pathlib.Path(tmp) / f"{regime}.json"
            log(f"== allocator {regime}: a process of its own")
            doc = run_child(
                [str(SCRIPT), *_child_argv(argv, regime, str(out))], out, f"allocator {regime}"
            )
            if doc is None:
                failed.append(regime)
                continue
            results.append(doc)
    wall = time.perf_counter() - t0
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
        "python": platform.python_version(), "cpus": os.cpu_count(), "argv": argv,
        "config": opts.config, "layout": opts.layout, "limited_area": lay.limited_area, "cells": opts.cells, "sizes": dict(lay.sizes),
        "levels": opts.levels, "threads": opts.threads, "rounds": opts.rounds, "modes": opts.modes,
        "allocators": opts.allocators, "substeps": opts.substeps, "lprep_adv": opts.lprep_adv,
        "decide_as": opts.decide_as,
        "programs": opts.programs, "rtol": RTOL, "wall_s": round(wall, 1), "failed_regimes": failed,
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
    }  # fmt: skip
    try:
        import dace
        import gt4py

        meta.update(gt4py=gt4py.__version__, dace=dace.__version__)
    except Exception:  # noqa: BLE001
        pass
    if opts.counts:
        doc = {"meta": meta, "counts": results[0] if results else None}
        text = counts_table(doc) if results else "counts: failed"
    else:
        doc = {"meta": meta, "regimes": results}
        text = timing_table(doc)
    text += (
        f"\n\nload average before {', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in meta['load_average_after'])}; wall time {wall:.0f} s"
    )
    print(text, flush=True)
    if opts.json:
        _write(doc, text, opts.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
