#!/usr/bin/env python
"""Fit the CPU cost model's constants to measured decisions (issue 10).

    .venv/bin/python bench/calibrate.py [--oracle bench/oracle/*_fresh.json] [--bench RUN.json]

Observations, each a time saved against stock (stock's median ms - the variant's):

- every variant of the oracle runs given (`--oracle`, default mode): `only:X` and the
  sets the greedy search built, with the set each build really applied; against the
  library's build that inlines nothing (`none`) where the run has one;
- every other program's inlined build in a `make bench` run (`--bench`, both memory
  modes: with persistent transients nothing is allocated per call).

Features of a decision set, summed over its intermediates: the model's own figures
(`CostModel.estimate` / `decide_group`) on the SDFG at the first `TopLevelDataFlowStep`,
with the symbolic extents set to the run's sizes (the program's own integer arguments
where a bound is one):

- `alloc`: MB of per-call transients removed (0 with persistent transients);
- `traffic`: MB of memory traffic saved, net of extra loads;
- `ops`: millions of operations recomputed (net of the producer's own work);
- `gathers`: MB loaded through neighbor tables by further copies.

Per thread count a least-squares fit without intercept,
`saved_ms = a*alloc + b*traffic - c*ops - d*gathers` (a coefficient that comes out
negative is dropped), prints the coefficients, what an operation, a byte of traffic and
of gathers are worth against an allocated byte, and every observation with the fitted
value and the A/A floor in ms. "ref ms" is the reference: the oracle's `none` build
where the run has one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import sys
import warnings


os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/calibrate_cache_{os.getpid()}")
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from gt4py_dace_xforms.policy import InlinePolicy  # noqa: E402  # after the build settings above


FEATURES = ("alloc", "traffic", "ops", "gathers")
SIGNS = np.array([1.0, 1.0, -1.0, -1.0])  # saved_ms = sum(sign * coef * feature)


# --- features: the model's figures of a decision set -------------------------------------


def scalar_args(args: dict) -> dict[str, int]:
    """The program's integer scalar arguments (`model_top`, `end_cell_halo`, ...): the
    values its symbolic domain bounds take in the timed runs."""
    out = {}
    for k, v in args.items():
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            out[k] = int(v)
    return out


def extent_sizes(symbols, sizes: dict, scalars: dict | None = None) -> dict[str, int]:
    """Values for the symbols an extent still has: range starts 0, range ends the size of
    the dimension they name (gt4py's `__<field>_<Dim>_range_<0|1>`, `horizontal_start/end`,
    `vertical_start/end`, a table's `__gt_conn_<X2Y>_source_size`, a program's `nlev`;
    any other start, `start_2nd_nudge_line_idx_e`: 0; any other symbol: the horizontal size)."""
    horizontal = sizes.get("horizontal") or sizes.get("Cell")
    out = {}
    for s in symbols:
        if scalars and s in scalars:
            out[s] = scalars[s]
            continue
        dim = next(
            (d for d in ("Cell", "Edge", "Vertex") if f"_{d}_" in s or s.endswith(f"_{d}")), None
        )
        vertical = (
            "_K_" in s or "vertical" in s or "lev" in s.lower()
        )  # also a program's own `nlev`
        size = sizes.get(dim, horizontal) if dim else (sizes["K"] if vertical else horizontal)
        conn = re.match(r"__gt_conn_([A-Z])[A-Za-z]*2", s)
        if conn and s.endswith("source_size"):
            size = {"C": sizes.get("Cell"), "E": sizes.get("Edge"), "V": sizes.get("Vertex")}.get(
                conn.group(1)
            ) or horizontal
        out[s] = 0 if (s.endswith("_range_0") or "start" in s) else size
    return out


class Recorder(InlinePolicy):
    """Accepts every sound candidate of `names` (like `InlineOnly`) and records the cost
    model's figures for it; no limit of the model applies (the oracle built these sets)."""

    writeback_retarget = True

    def __init__(self, names, model):
        self.names, self.model, self.figures = set(names), model, []

    def _take(self, cand, fig):
        from gt4py_dace_xforms.policy.default import Decision

        if cand.intermediate.data not in self.names:
            return Decision(False, "not named")
        self.figures.append((cand.intermediate.data, fig))
        # the figures go with the decision: a group's is committed, its members not priced again
        return Decision(True, "named", figures=fig)

    def decide(self, sdfg, cand):
        return self._take(cand, self.model.estimate(sdfg, cand))

    def decide_group(self, sdfg, cand, group, writeback_points=None):
        if cand.intermediate.data not in self.names:
            return self._take(cand, None)
        d = self.model.decide_group(sdfg, cand, group, writeback_points=writeback_points)
        return self._take(
            cand, d.figures if d.figures and "group_size" in d.figures else {"unpriced": d.reason}
        )


def set_features(
    sdfg, names, sizes: dict, persistent: bool, scalars: dict | None = None
) -> tuple[dict, list[str]]:
    """The features of inlining `names` on `sdfg`, and what could not be priced."""
    import copy

    from gt4py_dace_xforms.policy import CostModel
    from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates

    model = CostModel("cpu", max_distinct_offsets=99, max_ops_per_copy=10**9, writeback_max_offsets=99,
                      allocation_bytes_per_byte=0.0)  # fmt: skip
    # the extents' symbols at the run's sizes: price once unpinned to learn them, then again
    probe = Recorder(names, model)
    gt_inline_intermediates(copy.deepcopy(sdfg), policy=probe, validate=False)
    symbols = {s for _, f in probe.figures if f for s in f.get("assumed", ())}
    sized = dataclasses.replace(
        model, representative_sizes=tuple(sorted(extent_sizes(symbols, sizes, scalars).items()))
    )
    rec = Recorder(names, sized)
    gt_inline_intermediates(copy.deepcopy(sdfg), policy=rec, validate=False)
    feats = dict.fromkeys(FEATURES, 0.0)
    problems = []
    for name, f in rec.figures:
        if f is None:
            continue
        if "unpriced" in f:
            problems.append(f"{name}: {f['unpriced']}")
            continue
        if f.get("assumed"):
            problems.append(f"{name}: assumed {f['assumed']}")
        if "group_size" in f:
            alloc, traffic, ops, gathers = (f["group_allocation_bytes"], f["group_saved_bytes"], f["group_extra_ops"],
                                            f["group_gather_bytes"])  # fmt: skip
        else:
            alloc, ops, gathers = f["allocation_bytes"], f["extra_ops"], f["gather_bytes"]
            traffic = f["saved_bytes"] - (f["extra_load_bytes"] - gathers)
        feats["alloc"] += 0.0 if persistent else alloc / 1e6
        feats["traffic"] += traffic / 1e6
        feats["ops"] += ops / 1e6
        feats["gathers"] += gathers / 1e6
    missing = set(names) - {n for n, f in rec.figures if f is not None}
    problems += [f"{n}: not inlined on the first step's SDFG" for n in sorted(missing)]
    return feats, problems


def model_set(sdfg) -> frozenset[str]:
    """What the bench's runs inlined: the CPU model as it was then (the prior balance of
    0.25 B/op, no allocation priced, per-call transients; with persistent ones the runs
    before that rule decided the same)."""
    import copy

    from gt4py_dace_xforms.policy import CostModel
    from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates

    then = CostModel("cpu", bytes_per_op=0.25, allocation_bytes_per_byte=0.0)
    report = gt_inline_intermediates(copy.deepcopy(sdfg), policy=then, validate=False)
    return frozenset(r.intermediate for r in report.applied)


# --- observations ------------------------------------------------------------------------


def oracle_observations(path: str) -> tuple[str, dict, list[dict]]:
    d = json.load(open(path))
    label_set = {lab: frozenset(v["applied"]) for v in d["variants"] for lab in v["labels"]}
    obs = []
    for t in d["threads"]:
        med = t["median_ms"]
        # against the library's build inlining nothing where the run has one (its other
        # passes, the copy-chain folding, are no inlining); older runs: against stock
        ref = med.get("none", med["stock"])
        for lab, ms in med.items():
            if lab in ("stock", "A/A", "none") or not label_set.get(lab):
                continue
            obs.append({"source": os.path.basename(path), "program": d["program"], "set": label_set[lab],
                        "label": lab, "threads": t["threads"], "mode": "default", "ref_ms": ref,
                        "saved_ms": ref - ms, "floor": t["floor"]})  # fmt: skip
    return d["program"], d["sizes"], obs


def bench_observations(path: str) -> list[tuple[str, dict, dict]]:
    d = json.load(open(path))
    out = []
    for row in d["rows"]:
        if row.get("status") != "ok" or not row.get("inline_applied"):
            continue
        names = None  # the bench records counts only: the model's set, predicted when priced
        for mode, m in row["modes"].items():
            for t in m.get("timings", ()):
                med = t["median_ms"]
                out.append((row["program"], row["sizes"],
                            {"source": os.path.basename(path), "program": row["program"], "set": names,
                             "label": "inlined", "threads": t["threads"], "mode": mode, "ref_ms": med["stock"],
                             "saved_ms": med["stock"] - med["inlined"], "floor": t["floor"]}))  # fmt: skip
    return out


#: the oracle runs fitted by default: allocator pinned to `fresh`, with the `none` build
#: (compute_exner_exfac's predates it; there the model's one read is the best set anyway)
CALIBRATION_RUNS = (
    "compute_exner_exfac_fresh",
    "diag_normal_wind_fresh",
    "apply_diffusion_to_vn_fresh",
    "target_fresh_none",
)

#: bench cases the oracle runs under their icon4py name
_ORACLE_NAME = {"exner_exfac": "compute_exner_exfac"}


# --- the fit -----------------------------------------------------------------------------


def fit(obs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Least squares (weighted by 1/reference time, so that a long program does not decide
    alone) of saved_ms on the signed features; returns the coefficients and residuals."""
    x = np.array([[o["features"][f] for f in FEATURES] for o in obs]) * SIGNS
    y = np.array([o["saved_ms"] for o in obs])
    w = 1.0 / np.array([o["ref_ms"] for o in obs])
    active = [i for i in range(len(FEATURES)) if np.any(x[:, i])]
    coef = np.zeros(len(FEATURES))
    while active:  # drop a coefficient that comes out negative (a cost cannot be a gain)
        c, *_ = np.linalg.lstsq(x[:, active] * w[:, None], y * w, rcond=None)
        if (c >= 0).all():
            coef[active] = c
            break
        active.pop(int(np.argmin(c)))
    return coef, y - x @ coef


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--oracle",
        nargs="*",
        default=[str(HERE / "oracle" / f"{n}.json") for n in CALIBRATION_RUNS],
    )
    p.add_argument("--bench", nargs="*", default=[str(HERE / "agreement" / "final" / "run1.json")])
    p.add_argument(
        "--features-cache", default=None, help="json file to keep the priced sets in between runs"
    )
    p.add_argument("--out", default=None, help="also write the printed fit to this file")
    opts = p.parse_args(argv)

    import oracle as oracle_cli
    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.integration import capture

    by_program: dict[str, tuple[dict, list[dict]]] = {}
    for path in opts.oracle:
        prog, sizes, obs = oracle_observations(path)
        by_program.setdefault(prog, (sizes, []))[1].extend(obs)
    oracled = set(by_program)
    for path in opts.bench:
        for prog, sizes, o in bench_observations(path):
            if (
                prog not in oracled and _ORACLE_NAME.get(prog) not in oracled
            ):  # the oracle's runs separate the inlining from the library's other passes
                by_program.setdefault(prog, (sizes, []))[1].append(o)

    cache = (
        json.load(open(opts.features_cache))
        if opts.features_cache and os.path.exists(opts.features_cache)
        else {}
    )
    step = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    for prog, (sizes, obs) in by_program.items():
        sdfg = None
        for o in obs:
            if o["set"] is None and f"{prog}|model" in cache:
                o["set"] = frozenset(cache[f"{prog}|model"])
            key = f"{prog}|{'+'.join(sorted(o['set'] or ['model']))}|{o['mode'] == 'persistent'}"
            if key not in cache:
                if sdfg is None:
                    _, program, args, provider, _ = oracle_cli.resolve(prog, quick=False)
                    sdfg = capture.capture_stages(program, [step], offset_provider=provider)[step]
                    scalars = scalar_args(args)
                if o["set"] is None:
                    o["set"] = model_set(sdfg)
                    cache[f"{prog}|model"] = sorted(o["set"])
                    key = f"{prog}|{'+'.join(sorted(o['set']))}|{o['mode'] == 'persistent'}"
                feats, problems = set_features(
                    sdfg, o["set"], sizes, o["mode"] == "persistent", scalars
                )
                cache[key] = {"features": feats, "problems": problems}
            o.update(cache[key])
    if opts.features_cache:
        pathlib.Path(opts.features_cache).write_text(json.dumps(cache, indent=1) + "\n")

    everything = [o for _, obs in by_program.values() for o in obs]
    lines = [
        f"note: {o['program']} {o['label']}: {'; '.join(o['problems'])}"
        for o in everything
        if o["problems"]
    ]
    for threads in sorted({o["threads"] for o in everything}):
        obs = [o for o in everything if o["threads"] == threads]
        coef, resid = fit(obs)
        a, b, c, d = coef
        lines.append(f"\n{threads} thread(s), {len(obs)} observations: saved_ms = {a:.4g}*alloc_MB + {b:.4g}*traffic_MB"
                     f" - {c:.4g}*Mop - {d:.4g}*gathers_MB")  # fmt: skip
        if a > 0:
            # against the allocation (the term the data determine best): bytes of a removed
            # per-call transient one recomputed operation costs, and what a byte of traffic
            # and of gathers is worth
            lines.append(
                f"  per allocated byte: an operation costs {c / a:.3g} B, traffic {b / a:.3g}, gathers {d / a:.3g}"
            )
        lines.append(f"  {'program':24} {'variant':34} {'mode':10} {'alloc':>7} {'traffic':>8} {'Mop':>8} {'gath':>7}"
                     f" {'ref ms':>9} {'saved ms':>9} {'fit ms':>8} {'floor ms':>8}")  # fmt: skip
        for o, r in zip(obs, resid):
            f = o["features"]
            lines.append(f"  {o['program'][:24]:24} {o['label'][:34]:34} {o['mode']:10} {f['alloc']:7.1f}"
                         f" {f['traffic']:8.1f} {f['ops']:8.1f} {f['gathers']:7.1f} {o['ref_ms']:9.2f}"
                         f" {o['saved_ms']:9.2f} {o['saved_ms'] - r:8.2f} {o['floor'] * o['ref_ms']:8.2f}")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if opts.out:
        pathlib.Path(opts.out).write_text(
            f"inputs: {[os.path.relpath(x, HERE.parent) for x in opts.oracle + opts.bench]}\n{text}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
