"""The oracle: which decision set is fastest for one program on this machine, and how far
the cost model's choice is from it.

`run_oracle()` compiles one gt4py program in several *variants*, each a set of
intermediates whose reads are inlined (`policy.InlineOnly`), next to stock and a second
stock build (the A/A pair, the noise floor):

- `none`: the library's build inlining nothing (its other passes still run: the
  copy-chain folding); `model`: the cost model's choice (`CostModel("cpu")`), `sound`:
  everything sound (`InlineWhereSound()`);
- `only:X`: the reads of one intermediate `X` alone, for every `X` that "everything
  sound" inlines;
- a greedy best set (`greedy_search`): start from the fastest single, add the single
  that helps most, repeat while it helps.

The decision sets are predicted before anything is compiled, by running the pass on the
SDFG at the first `TopLevelDataFlowStep` (what the census does): variants that would make
the same decisions share one build. After compiling, each build's own report gives what
it really applied, and its outputs are compared with stock's (`census_compare`'s
tolerance), so a variant that computes something else is never timed as a candidate.

Timing (`measure.timing`): every variant on the same inputs per round, balanced
orders, at each thread count; ratios to stock with their intervals and the A/A floor;
the *regret* is the model's time over the best variant's, per round, with its interval.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from gt4py_dace_xforms.measure.timing import (
    Interval,
    Timing,
    median_interval,
    noise_floor,
    omp_threads,
    pin_allocator,
    time_rounds,
    verdict,
)  # fmt: skip
from gt4py_dace_xforms.policy import CostModel, InlineOnly, InlinePolicy, InlineWhereSound
from gt4py_dace_xforms.tools.compare import Build, inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.tools.programs import copy_args


STOCK, AA, NONE, MODEL, SOUND = "stock", "A/A", "none", "model", "sound"
#: the regret the done-when of issue 10 allows (or the A/A floor, whichever is larger)
REGRET_GOAL = 1.03


def only_label(names: frozenset[str]) -> str:
    """The label of the variant that inlines exactly `names`.

    Args:
        names: the intermediates.

    Returns:
        `only:` and the names, sorted, joined by `+`.
    """
    return "only:" + "+".join(sorted(names))


# --- the greedy search, apart from any compiling -------------------------------------------


@dataclasses.dataclass(frozen=True)
class GreedyStep:
    """One step of `greedy_search`: the sets tried and their median ratios to stock,
    measured together with the set kept so far (`kept_ratio`, same rounds)."""

    tried: tuple[tuple[frozenset[str], float], ...]
    kept: frozenset[str]
    kept_ratio: float
    accepted: Optional[frozenset[str]]


def greedy_search(
    singles: Mapping[str, float],
    measure: Callable[[Sequence[frozenset[str]]], Mapping[frozenset[str], float]],
    *,
    max_steps: int = 8,
) -> tuple[frozenset[str], list[GreedyStep]]:
    """The greedy best set: `singles` maps each intermediate to its variant's median ratio
    to stock; the fastest single below 1 starts the set. Each step `measure`s (median ratio
    to stock, same rounds for all) the kept set plus each set with one more intermediate,
    drawn from the singles that helped alone (ratio < 1; one that does not help alone is
    not tried in a combination), and keeps the fastest if it beats the kept set. Stops when
    nothing beats it, the pool is empty or after `max_steps` steps. Returns the set (empty:
    stock is best) and the steps.

    Args:
        singles: intermediate -> its single variant's median ratio to stock.
        measure: times sets of intermediates: set -> median ratio to stock.
        max_steps: the most steps.

    Returns:
        the best set and the steps taken.
    """
    pool = sorted((n for n, r in singles.items() if r < 1.0), key=lambda n: (singles[n], n))
    steps: list[GreedyStep] = []
    if not pool:
        return frozenset(), steps
    kept = frozenset([pool[0]])
    while len(steps) < max_steps:
        trials = [kept | {n} for n in pool if n not in kept]
        if not trials:
            break
        ratios = measure([kept, *trials])
        kept_ratio = ratios[kept]
        tried = tuple((t, ratios[t]) for t in trials)
        best, best_ratio = min(tried, key=lambda tr: (tr[1], sorted(tr[0])))
        accepted = best if best_ratio < kept_ratio else None
        steps.append(GreedyStep(tried, kept, kept_ratio, accepted))
        if accepted is None:
            break
        kept = accepted
    return kept, steps


# --- variants and builds -------------------------------------------------------------------


def predicted_sets(sdfg: Any) -> dict[str, frozenset[str]]:
    """The intermediates `model` and `sound` inline on `sdfg` (the SDFG at the first
    `TopLevelDataFlowStep`), each pass on its own copy.

    Args:
        sdfg: the SDFG at the first `TopLevelDataFlowStep`.

    Returns:
        `model` and `sound` -> the intermediates they inline.
    """
    from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates

    out = {}
    for label, policy in ((MODEL, CostModel("cpu")), (SOUND, InlineWhereSound())):
        report = gt_inline_intermediates(copy.deepcopy(sdfg), policy=policy, validate=False)
        out[label] = frozenset(r.intermediate for r in report.applied)
    return out


@dataclasses.dataclass
class Variant:
    """One compiled build of the program (several labels may share it)."""

    labels: list[str]
    policy: Optional[InlinePolicy]  # None: stock
    build: Optional[Build] = None
    caller: Any = None
    applied: frozenset[str] = frozenset()
    applied_reads: int = 0
    transients: int = 0
    build_s: float = 0.0
    #: fields outside the tolerance against stock ("" when all agree)
    mismatch: str = ""

    @property
    def label(self) -> str:
        """The variant's first label (the others are aliases)."""
        return self.labels[0]


class Oracle:
    """Builds and times the variants of one program on one set of inputs."""

    def __init__(self, program: Any, args: Mapping[str, Any], offset_provider: Mapping[str, Any],
                 log: Callable[[str], None] = print):  # fmt: skip
        self.program, self.args, self.offset_provider, self.log = (
            program,
            dict(args),
            dict(offset_provider),
            log,
        )
        self.variants: dict[str, Variant] = {}  # by label (aliases point to the same object)
        self._by_set: dict[frozenset[str], Variant] = {}
        self._reference: Optional[dict[str, np.ndarray]] = None

    def _fields(self, a: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {k: v.asnumpy().copy() for k, v in a.items() if hasattr(v, "asnumpy")}

    def add(
        self, label: str, policy: Optional[InlinePolicy], predicted: Optional[frozenset[str]] = None
    ) -> Variant:
        """Compile (first call) the variant `label`, unless a variant with the same
        `predicted` set exists: then `label` becomes an alias of it.

        Args:
            label: the variant's label.
            policy: the inline policy it builds with (None: stock).
            predicted: the intermediates it inlines (None: not known).

        Returns:
            the variant (an existing one where `label` is an alias).
        """
        if predicted is not None and predicted in self._by_set:
            v = self._by_set[predicted]
            v.labels.append(label)
            self.variants[label] = v
            self.log(f"{label}: same decisions as {v.label}, not built again")
            return v
        v = Variant([label], policy)
        v.build = stock_build() if policy is None else inline_build(policy=policy)
        v.caller = self.program.with_backend(v.build.backend)
        a = copy_args(self.args)
        t0 = time.perf_counter()
        v.caller(**a, offset_provider=self.offset_provider)
        v.build_s = time.perf_counter() - t0
        got = self._fields(a)
        if self._reference is None:
            self._reference = got
        else:
            v.mismatch = _mismatch(got, self._reference)
        if policy is not None:
            v.applied = frozenset(r.intermediate for r in v.build.report.applied)
            v.applied_reads = len(v.build.report.applied)
        v.transients = len(two_d_transients(v.build.sdfg))
        v.build.keep_last()  # keep memory bounded
        self.variants[label] = v
        if predicted is not None:
            self._by_set[predicted] = v
        self.log(f"{label}: built in {v.build_s:.0f} s, {v.applied_reads} reads of {len(v.applied)} intermediates"
                 f" inlined, {v.transients} 2-D transients{'; MISMATCH ' + v.mismatch if v.mismatch else ''}")  # fmt: skip
        return v

    def time(
        self, labels: Sequence[str], threads: int, rounds: int
    ) -> dict[str, tuple[float, ...]]:
        """Seconds per round of each distinct build among `labels` (+ stock), at `threads`.

        Args:
            labels: the variants to time.
            threads: the OpenMP thread count.
            rounds: how many rounds.

        Returns:
            label -> seconds per round.
        """
        builds: dict[str, Variant] = {}
        for label in [STOCK, *labels]:
            v = self.variants[label]
            builds.setdefault(v.label, v)
        omp_threads(threads)
        calls = {
            lab: (lambda a, c=v.caller: c(**a, offset_provider=self.offset_provider))
            for lab, v in builds.items()
        }
        for call in calls.values():  # warm-up at this thread count
            call(copy_args(self.args))
        times = time_rounds(calls, self.args, rounds)
        return {label: tuple(times[self.variants[label].label]) for label in [STOCK, *labels]}


def _mismatch(got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray]) -> str:
    from gt4py_dace_xforms.measure.census_compare import diff_field

    bad = [k for k in ref if not diff_field(k, "", got[k], ref[k]).within_tolerance]
    return ", ".join(bad)


# --- the whole run -------------------------------------------------------------------------


@dataclasses.dataclass
class ThreadResult:
    """Every timed variant at one thread count."""

    threads: int
    rounds: int
    median_ms: dict[str, float]
    ratio: dict[str, Interval]  # to stock, per round
    floor: float
    verdict: dict[str, str]
    best: str
    regret: Interval  # model / best, per round
    greedy: list[GreedyStep]
    seconds: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)  # per round

    @property
    def regret_ok(self) -> bool:
        """The model's regret is at most `REGRET_GOAL`, or inside the A/A floor."""
        return self.regret.median <= REGRET_GOAL or self.regret.median <= 1.0 + self.floor


@dataclasses.dataclass
class OracleResult:
    """An oracle run: the program, the predicted sets, every variant with its timings and the
    greedy search's steps."""

    program: str
    sizes: dict
    predicted: dict[str, list[str]]
    variants: list[Variant]
    results: list[ThreadResult]
    wall_s: float
    malloc: str = "glibc"

    def table(self) -> str:
        """The run as a text table: predictions, each variant's ratio per thread count, the
        search's steps.

        Returns:
            the table's text.
        """
        lines = [
            f"oracle: {self.program}, sizes {self.sizes}, allocator {self.malloc}, wall {self.wall_s:.0f} s"
        ]
        lines.append("predicted at the first TopLevelDataFlowStep: "
                     + "; ".join(f"{k} {sorted(v) or '-'}" for k, v in self.predicted.items()))  # fmt: skip
        head = ("variant", "same build as", "reads/intermediates inlined", "2-D tr", "build s")
        rows = [(lab, "" if lab == v.label else v.label, f"{v.applied_reads}/{len(v.applied)} {sorted(v.applied) or ''}",
                 str(v.transients), f"{v.build_s:.0f}") for v in self.variants for lab in v.labels]  # fmt: skip
        lines += _columns(head, rows)
        for r in self.results:
            lines.append("")
            lines.append(
                f"{r.threads} thread(s), {r.rounds} rounds: A/A floor ±{100 * r.floor:.1f}%"
            )
            rows = [(lab, f"{r.median_ms[lab]:.2f}", r.ratio[lab].text() if lab != STOCK else "1", r.verdict.get(lab, ""),
                     "<- best" if lab == r.best else "") for lab in r.median_ms]  # fmt: skip
            lines += _columns(("variant", "median ms", "ratio to stock [95%]", "verdict", ""), rows)
            for i, step in enumerate(r.greedy, 1):
                tried = ", ".join(f"{only_label(s)} {x:.3f}" for s, x in step.tried)
                lines.append(f"greedy step {i}: kept {only_label(step.kept)} {step.kept_ratio:.3f}; tried {tried};"
                             f" {'took ' + only_label(step.accepted) if step.accepted else 'none better: stop'}")  # fmt: skip
            lines.append(f"regret (model / best = {r.best}): {r.regret.text()} "
                         f"{'PASS' if r.regret_ok else 'FAIL'} (<= {REGRET_GOAL} or inside the floor)")  # fmt: skip
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The run as plain data, for the bench's run files.

        Returns:
            the JSON-ready dict.
        """
        return {
            "program": self.program, "sizes": self.sizes, "predicted": self.predicted, "wall_s": self.wall_s,
            "malloc": self.malloc,
            "variants": [{"labels": v.labels, "applied": sorted(v.applied), "applied_reads": v.applied_reads,
                          "transients": v.transients, "build_s": v.build_s, "mismatch": v.mismatch} for v in self.variants],
            "threads": [{
                "threads": r.threads, "rounds": r.rounds, "median_ms": r.median_ms, "floor": r.floor, "best": r.best,
                "ratio": {k: dataclasses.asdict(v) for k, v in r.ratio.items()}, "verdict": r.verdict,
                "regret": dataclasses.asdict(r.regret), "regret_ok": r.regret_ok,
                "times_ms": {k: [round(1e3 * x, 4) for x in v] for k, v in r.seconds.items()},
                "greedy": [{"kept": sorted(s.kept), "kept_ratio": s.kept_ratio,
                            "tried": [[sorted(t), x] for t, x in s.tried],
                            "accepted": sorted(s.accepted) if s.accepted else None} for s in r.greedy],
            } for r in self.results],
        }  # fmt: skip


def _columns(head: tuple, rows: list[tuple]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [
        fmt.format(*r) for r in rows
    ]


def _medians(times: Mapping[str, Sequence[float]]) -> dict[str, float]:
    ref = times[STOCK]
    return {k: statistics.median(t / r for t, r in zip(v, ref)) for k, v in times.items()}


def run_oracle(
    program: Any,
    args: Mapping[str, Any],
    offset_provider: Mapping[str, Any],
    first_step_sdfg: Any,
    *,
    name: str = "",
    sizes: Optional[dict] = None,
    threads: Sequence[int] = (1, 2),
    rounds: int = 12,
    search_rounds: int = 6,
    max_builds: int = 24,
    malloc: str = "glibc",
    log: Callable[[str], None] = print,
) -> OracleResult:
    """Build and time the variants of `program` (module doc). `first_step_sdfg`: the SDFG
    at the first `TopLevelDataFlowStep`, for predicting decision sets. Builds beyond
    `max_builds` (stock and A/A included) are not made: the greedy search stops there.
    `malloc`: the allocator regime every timing runs under (`timing.pin_allocator`).

    Args:
        program: the gt4py program.
        args: the program's keyword arguments.
        offset_provider: the offset provider.
        first_step_sdfg: the SDFG at the first `TopLevelDataFlowStep`.
        name: the program's name, for the result.
        sizes: the sizes it runs at, for the result.
        threads: the thread counts timed.
        rounds: rounds of the final timing.
        search_rounds: rounds per step of the greedy search.
        max_builds: the most builds, stock and A/A included.
        malloc: the allocator regime, for the result.
        log: progress lines go here.

    Returns:
        the `OracleResult`.
    """
    t_start = time.perf_counter()
    pin_allocator(malloc)
    predicted = predicted_sets(first_step_sdfg)
    log(f"predicted: model {sorted(predicted[MODEL])}, sound {sorted(predicted[SOUND])}")
    o = Oracle(program, args, offset_provider, log=log)
    o.add(STOCK, None)
    o.add(AA, None)
    # Inlining nothing is not stock: the library's other passes (the copy-chain folding)
    # still run. On compute_diagnostics_from_normal_wind, where the model inlines nothing,
    # taking stock for it credited one inline with the folding's gain as well.
    o.add(NONE, InlineOnly(()), frozenset())
    o.add(MODEL, CostModel("cpu"), predicted[MODEL])
    o.add(SOUND, InlineWhereSound(), predicted[SOUND])
    singles = sorted(predicted[SOUND])
    for single in singles:  # not `n`: below, `n` is a thread count
        o.add(only_label(frozenset([single])), InlineOnly((single,)), frozenset([single]))

    def built() -> int:
        return len({id(v) for v in o.variants.values()})

    def ensure(s: frozenset[str]) -> Optional[str]:
        label = only_label(s)
        if label not in o.variants:
            if built() >= max_builds:
                log(f"{label}: not built (max_builds={max_builds} reached)")
                return None
            o.add(label, InlineOnly(tuple(sorted(s))), s)
        return label

    results = []
    for n in threads:
        base = [AA, NONE, MODEL, SOUND, *(only_label(frozenset([s])) for s in singles)]
        base = [lab for lab in base if not o.variants[lab].mismatch]
        med = _medians(o.time(base, n, search_rounds))
        single_ratio = {
            s: med[only_label(frozenset([s]))] for s in singles if only_label(frozenset([s])) in med
        }

        def measure(sets: Sequence[frozenset[str]], n: int = n) -> dict[frozenset[str], float]:
            labels = {s: ensure(s) for s in sets}
            ok = [
                lab for lab in labels.values() if lab is not None and not o.variants[lab].mismatch
            ]
            m = _medians(o.time(ok, n, search_rounds))
            return {s: (m[lab] if lab in m else float("inf")) for s, lab in labels.items()}

        kept, steps = greedy_search(single_ratio, measure)
        labels = list(dict.fromkeys([*base, *(only_label(s.kept) for s in steps),
                                     *(only_label(s.accepted) for s in steps if s.accepted)]))  # fmt: skip
        if kept:
            labels.append(only_label(kept))
        labels = [
            lab
            for lab in dict.fromkeys(labels)
            if lab in o.variants and not o.variants[lab].mismatch
        ]
        log(f"{n} thread(s): final timing of {len(labels) + 1} variants, {rounds} rounds")
        times = o.time(labels, n, rounds)
        ref = times[STOCK]
        ratio = {lab: Timing(lab, t, ref).ratio for lab, t in times.items() if lab != STOCK}
        aa = ratio[AA]
        medians_ms = {lab: 1e3 * statistics.median(t) for lab, t in times.items()}
        # best: the lowest median ratio among the decision sets (stock and `none` both inline
        # nothing; A/A is stock again, the noise floor, not a candidate)
        best = min([STOCK, *(lab for lab in labels if lab != AA)],
                   key=lambda lab: 1.0 if lab == STOCK else ratio[lab].median)  # fmt: skip
        regret = median_interval([m / b for m, b in zip(times[MODEL], times[best])])
        results.append(ThreadResult(n, rounds, medians_ms, ratio, noise_floor(aa),
                                    {lab: verdict(r, aa).word for lab, r in ratio.items() if lab != AA}, best, regret,
                                    steps, dict(times)))  # fmt: skip
        log(f"{n} thread(s): best {best}, regret {regret.text()}")
    seen, variants = set(), []
    for v in o.variants.values():
        if id(v) not in seen:
            seen.add(id(v))
            variants.append(v)
    return OracleResult(name, dict(sizes or {}), {k: sorted(v) for k, v in predicted.items()}, variants, results,
                        time.perf_counter() - t_start, malloc)  # fmt: skip
