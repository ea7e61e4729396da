#!/usr/bin/env python
"""`make bench-build`: what the library costs at build time, for the substep's programs built
as icon4py's model run builds them (issue 59, item 5).

    .venv/bin/python bench/build_time.py [--layout lam-decomposed] [--levels 80]
        [--programs NAME,...] [--substep first|later|both] [--repeats 2] [--wall-rounds 1]
        [--profile NAME] [--json OUT]

Two measurements, stock (icon4py's own `dace_cpu` descriptor, `model_options.get_options`)
against the library (`integration.icon4py.backend`, tuned by the same `get_options`), on the
distinct builds of the substep (`substep.sites_for`: one per program and set of static
values, as `setup_program` compiles them):

1. **Optimizer time**, in this process, one translation at a time: each site's GTIR lowered
   to an SDFG and optimized by the backend's own translation step (no C++ compile), with
   `gt_auto_optimize` timed (its calls summed; a library hook's time is inside it), the
   library's hooks timed, and its candidate analyses (`analyse_candidate`, what its passes
   run on) and transformations' `can_be_applied` calls counted. Builds alternate their
   order per site and repeat `--repeats` times; the least time is kept (what the machine
   can do, not what the other processes took from it).
2. **Build wall time**, as a model run builds: gt4py's default build settings
   (`GT4PY_BUILD_JOBS` unset: a `spawn` pool of one worker per CPU, here 2), every site's
   `compile()` submitted (setup_program's `enable_jit=False` compile) and all waited for,
   stock and the library in turn (`--wall-rounds` rounds, alternating which goes first),
   each on a fresh session cache with a pool started for it (timed, as a model pays it).

`--profile NAME`: cProfile of the library's translation of one program (top functions by
cumulative time of the library's own code). Results: bench/build/.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import cProfile
import datetime
import io
import json
import os
import pathlib
import platform
import pstats
import sys
import tempfile
import time
import warnings
from typing import Any, Optional


os.environ.pop("GT4PY_BUILD_JOBS", None)  # gt4py's default: one worker per CPU, process mode
os.environ.pop("GT4PY_BUILD_JOBS_MODE", None)
os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
warnings.filterwarnings("ignore", message=r"Tried to remove `None` from the (in|out)-connectors")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

LABELS = ("stock", "library")


def log(msg: str) -> None:
    print(f"[build {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Counting:
    """Counts (and times) `can_be_applied` and `apply` of every library transformation
    class, and the calls of the library's hooks (`Hook.__call__`: all the library's work
    inside `gt_auto_optimize`), while active; gt4py's own transformations are not touched."""

    def __init__(self) -> None:
        self.calls: collections.Counter = collections.Counter()
        self.seconds: collections.Counter = collections.Counter()
        self._saved: list = []

    def _classes(self) -> list[type]:
        import dace

        import gt4py_dace_xforms.transformations as tr

        out = []
        for mod_name in getattr(tr, "__all__", []) or dir(tr):
            obj = getattr(tr, mod_name, None)
            if (
                isinstance(obj, type)
                and issubclass(obj, dace.transformation.transformation.PatternTransformation)
                and obj.__module__.startswith("gt4py_dace_xforms")
            ):
                out.append(obj)
        from gt4py_dace_xforms.integration import hooks

        return [*out, hooks.InlineHook, hooks.SweepPairHook, hooks.CopyHook, hooks.SplitGuard]

    def _timed(self, key: str, fn):
        """`fn`, counted and timed under `key`."""

        def wrapped(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls[key] += 1
                self.seconds[key] += time.perf_counter() - t0

        return wrapped

    def __enter__(self) -> "Counting":
        # The library's unit of analysis, wherever a module imported it by name.
        from gt4py_dace_xforms.analysis import candidate

        original_analyse = candidate.analyse_candidate
        analyse = self._timed("analyse_candidate", original_analyse)
        for mod in [
            m for n, m in sys.modules.items() if n.startswith("gt4py_dace_xforms") and m is not None
        ]:
            if getattr(mod, "analyse_candidate", None) is original_analyse:
                mod.analyse_candidate = analyse
                self._saved.append((mod, "analyse_candidate", original_analyse))
        for cls in self._classes():
            for meth in ("can_be_applied", "apply", "__call__"):
                if meth in cls.__dict__:
                    original = cls.__dict__[meth]
                    setattr(cls, meth, self._timed(f"{cls.__name__}.{meth}", original))
                    self._saved.append((cls, meth, original))
        return self

    def __exit__(self, *exc) -> None:
        for cls, meth, original in reversed(self._saved):
            setattr(cls, meth, original)
        self._saved.clear()


@contextlib.contextmanager
def optimizer_timer(acc: list[float]):
    """Sum of the wall time of every `gt_auto_optimize` call made meanwhile (the translation
    step looks it up on gt4py's transformations module at call time)."""
    from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

    original = gtx_transformations.gt_auto_optimize

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            acc.append(time.perf_counter() - t0)

    gtx_transformations.gt_auto_optimize = timed
    try:
        yield
    finally:
        gtx_transformations.gt_auto_optimize = original


def translator(label: str, program_name: str, tag: str) -> Any:
    """The translation step (uncached) of the backend `label` builds `program_name` with."""
    from substep import backend_from, descriptors

    backend = backend_from(descriptors(label, program_name, "default"), f"_build_{tag}_{label}")
    step = backend.executor.translation
    return getattr(step, "step", step)


def translate(label: str, site: Any, inputs: tuple[dict, dict], tag: str) -> dict:
    """Lower and optimize `site` once with `label`'s translation step: the seconds of the
    whole translation and of `gt_auto_optimize`, and the library's transformation calls."""
    from gt4py_dace_xforms.integration.capture import lower_to_gtir
    from gt4py_dace_xforms.integration.lowering import record_annotations

    program = site.call.ref.load()
    _args, offsets = inputs
    compilable = lower_to_gtir(program, None, offsets, static_args=site.static)
    step = translator(label, site.name, tag)
    acc: list[float] = []
    with Counting() as counting, optimizer_timer(acc):
        t0 = time.perf_counter()
        with record_annotations() if label == "library" else contextlib.nullcontext():
            step.generate_sdfg(
                compilable.data, compilable.args.offset_provider, compilable.args.column_axis
            )
        total = time.perf_counter() - t0
    return {
        "translation_s": total,
        "optimizer_s": sum(acc),
        "optimizer_calls": len(acc),
        "calls": dict(counting.calls),
        "seconds": {k: round(v, 4) for k, v in counting.seconds.items()},
    }


def hook_seconds(got: dict) -> float:
    """Seconds inside the library's hooks (its own work within `gt_auto_optimize`)."""
    return sum(v for k, v in got["seconds"].items() if k.endswith(".__call__"))


def optimizer_times(sites: list, inputs: dict, repeats: int) -> list[dict]:
    rows = []
    for i, site in enumerate(sites):
        best: dict[str, dict] = {}
        for r in range(repeats):
            order = LABELS if (i + r) % 2 == 0 else LABELS[::-1]
            for label in order:
                got = translate(label, site, inputs[site.key], f"{i}_{r}")
                if label not in best or got["optimizer_s"] < best[label]["optimizer_s"]:
                    best[label] = got
        ratio = best["library"]["optimizer_s"] / best["stock"]["optimizer_s"]
        lib_calls = sum(
            v for k, v in best["library"]["calls"].items() if k.endswith("can_be_applied")
        )
        analyses = best["library"]["calls"].get("analyse_candidate", 0)
        log(
            f"  {site.key}: gt_auto_optimize stock {best['stock']['optimizer_s']:.2f} s, library "
            f"{best['library']['optimizer_s']:.2f} s ({ratio:.2f}x), of which the library's hooks "
            f"{hook_seconds(best['library']):.2f} s; {analyses} candidate analyses, can_be_applied {lib_calls}"
        )
        rows.append(
            {
                "site": site.key,
                "program": site.name,
                "static": site.static,
                **{label: best[label] for label in LABELS},
                "ratio": round(ratio, 3),
            }
        )
    return rows


def _wait_all(programs: list) -> None:
    """Wait for every compilation submitted (gt4py's in-flight futures), re-raising errors."""
    try:
        from gt4py.next.otf.compiled_program import _ongoing_compilations
    except ImportError:  # another gt4py: wait by asking each program for its artifacts
        _ongoing_compilations = None
    if _ongoing_compilations is not None:
        futures = list(_ongoing_compilations)
        concurrent.futures.wait(futures)
        for f in futures:
            f.result()
    for p in programs:  # loads what finished (and raises what failed)
        pool = p.__dict__.get("_compiled_programs")
        for key in list(getattr(pool, "_compilation_jobs", {})):
            pool.compiled_programs[key] = pool._load_artifact(pool._compilation_jobs.pop(key))


def build_wall(label: str, sites: list, inputs: dict, tag: str) -> float:
    """Submit every site's static compile with `label`'s backend and wait for all: a fresh
    session cache (gt4py's workers build into the one their pool was started with, so the
    pool starts again on it, and its start is timed, as a model run's first build pays it)."""
    from gt4py.next.otf import runners
    from gt4py.next.otf.compilation import cache as gtx_cache
    from substep import backend_from, descriptors

    from gt4py_dace_xforms.tools.static import compile_static

    with tempfile.TemporaryDirectory(prefix=f"build_{label}_") as session:
        saved = gtx_cache._session_cache_dir_path
        gtx_cache._session_cache_dir_path = pathlib.Path(session)
        runners.reset_default_runner()
        try:
            t0 = time.perf_counter()
            programs = [
                compile_static(
                    site.call.ref.load(),
                    backend_from(
                        descriptors(label, site.name, "default"), f"_wall_{tag}_{label}_{i}"
                    ),
                    site.static,
                    inputs[site.key][1],
                )
                for i, site in enumerate(sites)
            ]
            _wait_all(programs)
            return time.perf_counter() - t0
        finally:
            runners.reset_default_runner()
            gtx_cache._session_cache_dir_path = saved


def profile(site: Any, inputs: dict, top: int = 40) -> str:
    prof = cProfile.Profile()
    prof.enable()
    translate("library", site, inputs[site.key], "profile")
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats("gt4py_dace_xforms", top)
    return out.getvalue()


def table(doc: dict) -> str:
    lines = [
        f"{'site':58s} {'stock s':>8s} {'library s':>9s} {'ratio':>6s} {'hooks s':>7s} {'analyses':>8s} "
        f"{'cba':>6s}"
    ]
    for r in doc["optimizer"]:
        cba = sum(v for k, v in r["library"]["calls"].items() if k.endswith("can_be_applied"))
        app = r["library"]["calls"].get("analyse_candidate", 0)
        lines.append(
            f"{r['site'][:58]:58s} {r['stock']['optimizer_s']:8.2f} {r['library']['optimizer_s']:9.2f} "
            f"{r['ratio']:6.2f} {hook_seconds(r['library']):7.2f} {app:8d} {cba:6d}"
        )
    s = sum(r["stock"]["optimizer_s"] for r in doc["optimizer"])
    lib = sum(r["library"]["optimizer_s"] for r in doc["optimizer"])
    hooks = sum(hook_seconds(r["library"]) for r in doc["optimizer"])
    lines.append(
        f"{'sum of gt_auto_optimize (one translation at a time)':58s} {s:8.2f} {lib:9.2f} {lib / s:6.2f} "
        f"{hooks:7.2f}"
    )
    for w in doc.get("wall", []):
        lines.append(
            f"build wall time, {doc['meta']['jobs']} jobs ({w['order']}): stock {w['stock']:.1f} s, "
            f"library {w['library']:.1f} s, {w['library'] / w['stock']:.2f}x"
        )
    return "\n".join(lines)


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--layout", default="lam-decomposed")
    p.add_argument("--cells", type=int, default=20480)
    p.add_argument("--levels", type=int, default=80)
    p.add_argument("--programs", default="")
    p.add_argument("--substep", default="both", choices=("first", "later", "both"))
    p.add_argument(
        "--repeats", type=int, default=2, help="translations per build and site (least kept)"
    )
    p.add_argument("--wall-rounds", type=int, default=1, help="build wall time rounds (0: none)")
    p.add_argument("--skip-optimizer", action="store_true", help="only the wall time")
    p.add_argument(
        "--profile", default=None, metavar="NAME", help="cProfile the library's translation of NAME"
    )
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    opts = parse(argv)
    from substep import site_inputs, sites_for

    from gt4py_dace_xforms.tools.layouts import layout as make_layout

    lay = make_layout(opts.layout, opts.cells)
    substeps = ["first", "later"] if opts.substep == "both" else [opts.substep]
    programs = [p for p in opts.programs.split(",") if p] or None
    sites = sites_for(lay, opts.levels, substeps, lprep_adv=False, programs=programs)
    inputs = site_inputs(sites, lay, opts.levels)
    if opts.profile:
        site = next(s for s in sites if s.key == opts.profile or s.name == opts.profile)
        print(profile(site, inputs))
        return 0
    import gt4py

    jobs = min(os.cpu_count() or 1, 32)
    doc: dict[str, Any] = {
        "meta": {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "layout": opts.layout,
            "levels": opts.levels,
            "sites": len(sites),
            "jobs": jobs,
            "mode": "process (spawn), gt4py's default",
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "gt4py": gt4py.__version__,
            "load_before": os.getloadavg()[0],
        },
        "optimizer": [],
        "wall": [],
    }
    log(
        f"{len(sites)} builds per side ({', '.join(s.key for s in sites)}); load {doc['meta']['load_before']:.2f}"
    )
    if not opts.skip_optimizer:
        log("optimizer time, one translation at a time in this process")
        doc["optimizer"] = optimizer_times(sites, inputs, opts.repeats)
    if opts.wall_rounds:
        log(f"build wall time: gt4py's default build settings ({jobs} jobs, process pool)")
        for r in range(opts.wall_rounds):
            order = LABELS if r % 2 == 0 else LABELS[::-1]
            got = {}
            for label in order:
                got[label] = build_wall(label, sites, inputs, f"r{r}")
                log(f"  round {r + 1}: {label} {got[label]:.1f} s")
            doc["wall"].append({"order": " then ".join(order), **got})
    doc["meta"]["load_after"] = os.getloadavg()[0]
    text = (
        table(doc)
        if doc["optimizer"]
        else "\n".join(
            f"build wall time ({w['order']}): stock {w['stock']:.1f} s, library {w['library']:.1f} s"
            for w in doc["wall"]
        )
    )
    print(text, flush=True)
    if opts.json:
        out = pathlib.Path(opts.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        out.with_suffix(".txt").write_text(
            f"bench/build_time.py {' '.join(argv or sys.argv[1:])}\n{doc['meta']}\n\n{text}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
