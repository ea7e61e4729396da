"""Timing builds of one program against each other, and what the times allow one to say.

Used by `make bench` (bench/bench.py) and the demo. The measurement:

- `time_rounds`: every build once per round, in the orders of `round_order` (the builds'
  order and its reverse, rotated: over 2n rounds every build takes every position equally
  often, and with two or three builds follows every other equally often); per round one fresh copy of the input
  fields, and before each build's call the same field objects are reset to the inputs
  (outside the timed region), so every build of a round runs on the same memory, and the
  rounds draw new memory.
- `Timing`: one build's per-round times next to the reference build's (stock) of the same
  rounds; `ratios` are per round.
- `median_interval`: the median of the per-round ratios and a distribution-free
  confidence interval for it (order statistics, binomial coverage >= 95% where the
  number of rounds allows).
- The noise floor is the A/A pair: stock against a second, separately built stock
  backend, timed in the same rounds. `noise_floor`: how far from 1 the A/A interval
  reaches, at least `MIN_FLOOR`. `verdict`: "faster" / "slower" only when the build's
  whole interval lies beyond the floor, otherwise "no measurable difference".
  `undecided`: the interval straddles an edge of the floor, or it is "no measurable
  difference" against a floor wider than `WIDE_FLOOR` (the bench then adds rounds, up
  to a limit). `short_span`: a decided configuration whose rounds span less than
  `MIN_SPAN_S` seconds also gets more, so that no verdict rests on one of the
  machine's phases.
- `compiled_sdfgs` / `compiled_sdfg_calls` / `replace_persistent`: the compiled SDFGs a
  build runs (with how often each ran), and their
  persistent transients freed so that the next call allocates them anew (the bench does
  it before every batch: one process otherwise keeps one placement of them).
- `omp_threads`: the OpenMP thread count of the compiled programs already loaded
  (`omp_set_num_threads` of the process's OpenMP runtime, the setting OMP_NUM_THREADS
  gives at start-up).
- `pin_allocator`: how glibc's malloc serves the large blocks (2-D transients allocated on
  every call, the per-round input copies), fixed for the rest of the process. Left to
  itself, glibc moves its mmap threshold to the largest block freed so far, so whether a
  call's transients get fresh zeroed pages or reuse the last call's memory depends on what
  ran before it: on the target that swung one build's time by 20-30 % between rounds,
  and `scan`'s ratio by round parity (0.6 / 1.1), more than any inlining decision.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import statistics
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from gt4py_dace_xforms.policy import allocator
from gt4py_dace_xforms.tools.programs import copy_args


FASTER = "faster"
SLOWER = "slower"
NO_DIFFERENCE = "no measurable difference"


# --- measuring -----------------------------------------------------------------------------


def _is_field(v: Any) -> bool:
    return hasattr(v, "ndarray") and hasattr(v, "domain")


def reset_fields(dst: Mapping[str, Any], src: Mapping[str, Any]) -> None:
    """Copy every field of `src` into the field of the same name in `dst`, in place.

    Args:
        dst: name -> field to overwrite.
        src: name -> field to copy from.
    """
    for k, v in src.items():
        if _is_field(v):
            dst[k].ndarray[...] = v.ndarray


def round_order(labels: Sequence[str], r: int) -> list[str]:
    """The order of round `r`: `labels` forward in even rounds, reversed in odd ones, rotated
    by `r // 2`. Over 2n rounds (n labels) every label is in every position equally often;
    with two or three labels every label also directly follows every other equally often
    (for three, the six orders are all orders), where a rotation alone would always put the
    same build right after stock. (With more, a label follows only its neighbours in
    `labels`.)

    Args:
        labels: the builds' labels.
        r: the round's index.

    Returns:
        the labels in that round's order.
    """
    base = list(labels) if r % 2 == 0 else list(labels)[::-1]
    k = (r // 2) % len(base)
    return base[k:] + base[:k]


def time_rounds(
    calls: Mapping[str, Callable[[dict], Any]],
    args: Mapping[str, Any],
    rounds: int,
    *,
    sync: Optional[Callable[[], Any]] = None,
) -> dict[str, list[float]]:
    """Seconds per call of every build, `rounds` times: each round one fresh copy of `args`
    (new buffers), which every build of the round gets, reset to `args` before its call
    (outputs are written in place), in the order `round_order` gives (balanced with `rounds`
    a multiple of twice the number of builds).
    `sync` (e.g. a device synchronization) runs before and after each timed call.

    Args:
        calls: label -> the build's call, taking the arguments.
        args: the program's keyword arguments.
        rounds: how many rounds.
        sync: called after each call (a device synchronize; None: nothing).

    Returns:
        label -> seconds per round.
    """
    sync = sync or (lambda: None)
    times: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(rounds):
        shared = copy_args(args)
        for label in round_order(list(calls), r):
            reset_fields(shared, args)
            sync()
            t0 = time.perf_counter()
            calls[label](shared)
            sync()
            times[label].append(time.perf_counter() - t0)
    return times


# --- summarizing ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Interval:
    """The median of some values, and a confidence interval for it: the k-th smallest and
    the k-th largest value, k chosen so that the median lies between them with probability
    `coverage` (for any distribution, the values independent)."""

    median: float
    lo: float
    hi: float
    n: int
    coverage: float

    def text(self, spec: str = ".3f") -> str:
        """The interval as `median [lo..hi]`.

        Args:
            spec: the format of each number.

        Returns:
            the text.
        """
        return f"{self.median:{spec}} [{self.lo:{spec}}..{self.hi:{spec}}]"


def _binomial_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """`Interval` of `values`: the largest k (at least 1) whose interval
    [x_(k), x_(n+1-k)] covers the median with probability >= `confidence`; with too few
    values for that, k = 1 (min..max) and its lower coverage.

    Args:
        values: the samples.
        confidence: the coverage wanted.

    Returns:
        the `Interval`.

    Raises:
        ValueError: where `values` is empty.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * _binomial_cdf_half(k, n) >= confidence:
        k += 1
    coverage = 1 - 2 * _binomial_cdf_half(k - 1, n)
    return Interval(statistics.median(xs), xs[k - 1], xs[n - k], n, coverage)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Per-round run times of one build and of the reference build, same rounds."""

    label: str
    seconds: tuple[float, ...]
    reference: tuple[float, ...]

    @property
    def ratios(self) -> list[float]:
        """Per round, the build's seconds over the reference's."""
        return [t / r for t, r in zip(self.seconds, self.reference)]

    @property
    def median_ms(self) -> float:
        """The build's median milliseconds per call."""
        return 1e3 * statistics.median(self.seconds)

    @property
    def ratio(self) -> Interval:
        """Median of the per-round ratios (each round runs every build once), with its interval."""
        return median_interval(self.ratios)


# --- judging ---------------------------------------------------------------------------------


#: The least floor a verdict is held to. One A/A pair is one draw of how two identical
#: builds land, and its interval narrows with rounds towards that draw alone, while the
#: draws differ between processes: over the six full runs in bench/agreement/{final,
#: current,span} (allocator `fresh`, 192 A/A pairs: the eight programs besides the demos),
#: identical builds' medians lay more than 2 % from 1 in 32 pairs (one in six) and more
#: than 3 % in 13 (one in fifteen), up to 5.6 %. At 2 %, the target's default-mode effect
#: (0.959-1.006 over four runs, intervals reaching 0.977-1.030) was "faster" in one run of
#: the pair and "no measurable difference" in the other.
MIN_FLOOR = 0.03


def noise_floor(aa: Interval, minimum: float = MIN_FLOOR) -> float:
    """How far from 1 the A/A pair's interval reaches (a ratio that identical code can
    show), and never less than `minimum` (see `MIN_FLOOR`).

    Args:
        aa: the A/A pair's interval.
        minimum: the smallest floor.

    Returns:
        the floor, a fraction.
    """
    return max(minimum, abs(aa.lo - 1.0), abs(aa.hi - 1.0))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A build's ratio to stock judged against the A/A floor: faster, slower or no measurable
    difference."""

    word: str  # FASTER, SLOWER or NO_DIFFERENCE
    ratio: Interval
    floor: float

    def text(self) -> str:
        """The verdict, its interval and the floor as one phrase.

        Returns:
            the text.
        """
        if self.word == NO_DIFFERENCE:
            return f"{NO_DIFFERENCE} ({self.ratio.text()} within the A/A floor of ±{100 * self.floor:.1f}%)"
        return f"{self.word}: {self.ratio.text()}x stock, outside the A/A floor of ±{100 * self.floor:.1f}%"


def verdict(ratio: Interval, aa: Interval) -> Verdict:
    """`ratio` (a build / stock) against the A/A pair (second stock / stock): faster when its
    whole interval lies below 1 - floor, slower when above 1 + floor, else no measurable
    difference (in particular whenever the median lies inside the floor).

    Args:
        ratio: the build's ratio to stock.
        aa: the A/A pair's ratio.

    Returns:
        the `Verdict`.
    """
    floor = noise_floor(aa)
    if ratio.hi < 1.0 - floor:
        word = FASTER
    elif ratio.lo > 1.0 + floor:
        word = SLOWER
    else:
        word = NO_DIFFERENCE
    return Verdict(word, ratio, floor)


#: An A/A floor wider than this is itself noise (a quiet run of the target shows ±3-6 %):
#: a "no measurable difference" against it is extended, see `undecided`.
WIDE_FLOOR = 0.05


def undecided(ratio: Interval, aa: Interval, wide: float = WIDE_FLOOR) -> bool:
    """Whether more rounds could still move `ratio`'s verdict: its interval straddles an
    edge of the A/A floor (1 - floor or 1 + floor), or it is "no measurable difference"
    against a floor wider than `wide` (a noisy A/A pair; more rounds narrow it). A bench
    that stops there reports a coin toss; two runs disagreed on both kinds (the target at
    2 threads: 0.969 [0.896..1.032] within ±5.7 %, then 0.905 [0.875..0.943] beyond
    ±4.3 %; later 0.990 [0.899..1.029] within ±12.8 % from a noisy A/A pair, 1.036
    [0.948..1.128], then 0.936 [0.896..0.959] beyond ±3.2 %).

    Args:
        ratio: the build's ratio to stock.
        aa: the A/A pair's ratio.
        wide: the floor beyond which an A/A pair counts as noisy.

    Returns:
        True where more rounds could change the verdict.
    """
    floor = noise_floor(aa)
    if any(ratio.lo < edge < ratio.hi for edge in (1.0 - floor, 1.0 + floor)):
        return True
    return floor > wide and verdict(ratio, aa).word == NO_DIFFERENCE


# --- the allocator ---------------------------------------------------------------------------

#: `pin_allocator`'s regimes. `fresh`: every block of 128 KiB or more is mapped when
#: allocated and unmapped when freed, so each call's transients get new pages that the
#: kernel zeroes (glibc's behaviour before its threshold first moves; the per-call
#: allocation cost at its highest). `reuse`: blocks up to 32 MiB (glibc's largest
#: threshold) come from the heap, which is never trimmed, so a call reuses the memory
#: the last one freed (its cost at its lowest, short of `PERSISTENT`). `glibc`: left as
#: glibc adapts it (history-dependent). One regime per process (`pin_allocator`).
ALLOCATORS = ("fresh", "reuse", "glibc")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_FRESH_THRESHOLD = 128 * 1024
_REUSE_THRESHOLD = 32 * 1024 * 1024
_INT_MAX = 2**31 - 1
_pinned: list[str] = []


def _mallopt() -> Callable[[int, int], int]:
    try:
        libc = ctypes.CDLL(None)
        _ = libc.gnu_get_libc_version  # only glibc has it (musl, macOS: AttributeError)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        raise RuntimeError(
            "cannot pin the allocator: this process's C library is not glibc (no mallopt)"
        ) from None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt


def regime_page_bytes(regime: str) -> int:
    """The `fresh_page_bytes` the cost model is told under `regime` (`pin_allocator`).

    Args:
        regime: the allocator regime (`ALLOCATORS`).

    Returns:
        the bytes.

    Raises:
        ValueError: an unknown regime.
    """
    if regime not in ALLOCATORS:
        raise ValueError(
            f"unknown allocator regime {regime!r}; choose from {', '.join(ALLOCATORS)}"
        )
    if regime == "glibc":
        return allocator.GLIBC_MMAP_THRESHOLD_MAX
    return _FRESH_THRESHOLD if regime == "fresh" else _REUSE_THRESHOLD


def pin_allocator(regime: str) -> str:
    """Fix how glibc's malloc serves large blocks in this process (`ALLOCATORS`), for every
    allocation from now on (numpy's, and the compiled programs' `new`). One regime per
    process, pinned before the timings: glibc serves a block from free heap chunks before
    it asks for a new mapping, so after `reuse` has left freed memory in the heap, `fresh`
    would still hand it out (measured: 0 faults per MiB after the switch), and glibc's own
    adaptive threshold does not come back at all. Pinning the regime already pinned does
    nothing; another one raises. The CPU cost model is told which arrays get fresh pages
    (`policy.allocator.set_fresh_page_bytes`: 128 KiB under `fresh`, 32 MiB otherwise), so
    that a library build made after the pin decides for the regime it is timed in.
    Returns the regime.

    Args:
        regime: the allocator regime (`ALLOCATORS`).

    Returns:
        the regime pinned.

    Raises:
        ValueError: an unknown regime.
        RuntimeError: where another regime is pinned in this process, the C library is not glibc or
            mallopt refuses the settings.
    """
    if regime not in ALLOCATORS:
        raise ValueError(
            f"unknown allocator regime {regime!r}; choose from {', '.join(ALLOCATORS)}"
        )
    if _pinned:
        if regime == _pinned[0]:
            return regime
        raise RuntimeError(
            f"the allocator is pinned to {_pinned[0]!r} in this process: time {regime!r} in a process of its own"
        )
    if regime == "glibc":
        _pinned.append(regime)  # nothing to set; but nothing else may be pinned after timing it
        allocator.set_fresh_page_bytes(regime_page_bytes(regime))
        return regime
    mallopt = _mallopt()
    if regime == "fresh":
        ok = mallopt(_M_MMAP_THRESHOLD, _FRESH_THRESHOLD) and mallopt(
            _M_TRIM_THRESHOLD, _FRESH_THRESHOLD
        )
    else:
        ok = mallopt(_M_MMAP_THRESHOLD, _REUSE_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, _INT_MAX)
    if not ok:
        raise RuntimeError(f"mallopt refused the {regime!r} settings")
    _pinned.append(regime)
    allocator.set_fresh_page_bytes(regime_page_bytes(regime))
    return regime


def reallocation_faults_per_mib(mib: int = 16) -> float:
    """Minor page faults per MiB when a block of `mib` MiB is allocated, written and freed,
    then allocated and written again: about 256 (every 4 KiB page) where freed blocks go
    back to the kernel (`fresh`), about 0 where they are reused (`reuse`). What the bench
    records to show that a pin took.

    Args:
        mib: the block's size in MiB.

    Returns:
        the faults per MiB.

    Raises:
        MemoryError: where the block cannot be allocated.
    """
    import resource

    libc = ctypes.CDLL(None)
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    size = mib * 2**20

    def touch() -> None:
        p = libc.malloc(size)
        if not p:
            raise MemoryError(f"malloc({size}) failed")
        ctypes.memset(p, 1, size)
        libc.free(p)

    touch()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    touch()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / mib


def may_extend(
    done: int,
    batch: int,
    max_rounds: int,
    *,
    spent_s: float = 0.0,
    budget_s: float = 0.0,
    cap_rounds: Optional[int] = None,
) -> bool:
    """Whether an undecided configuration (`undecided`) that has run `done` rounds gets
    another `batch`: while that stays within `max_rounds`, or, beyond it, while its
    timing has used less than `budget_s` seconds, never past `cap_rounds` (default 20 x
    `batch`). A round limit alone spends the same rounds on a 0.4 s call as on a 40 ms
    one; a 7 % effect on the edge of a ±3-5 % floor needs more than 36 rounds to settle
    (`three_level`, two runs: 0.926 [0.874..0.959] beyond ±3.0 %, 0.925 [0.878..0.967]
    within ±5.0 %), and the cheap programs can afford them.

    Args:
        done: rounds run.
        batch: rounds added at a time.
        max_rounds: rounds allowed regardless of time.
        spent_s: seconds its timing has used.
        budget_s: seconds allowed beyond `max_rounds`.
        cap_rounds: the most rounds (None: 20 x `batch`).

    Returns:
        True where it gets another batch.
    """
    after = done + batch
    if not _within_cap(after, batch, cap_rounds):
        return False
    return after <= max_rounds or spent_s < budget_s


def _within_cap(after: int, batch: int, cap_rounds: Optional[int]) -> bool:
    """Whether `after` rounds stay within `cap_rounds` (default 20 x `batch`), the limit
    of every extension (`may_extend`, `short_span`)."""
    return after <= (cap_rounds if cap_rounds is not None else 20 * batch)


#: The least time a configuration's rounds span before its verdict counts, in seconds
#: (bench `--min-span-seconds`). This machine runs in phases of seconds in which one
#: build's time moves and another's does not: `apply_diffusion_to_vn`'s inlined build
#: (`PERSISTENT`, 1 thread) went 0.86 to 1.10x stock from one 12-round block to the next
#: while the A/A pair stayed within 2 %, and a run that decided it after its first 12
#: rounds (3 s) called it 0.856 "faster", where the run before, over 168 rounds, had
#: 0.948 and no measurable difference.
MIN_SPAN_S = 20.0


def short_span(
    done: int,
    batch: int,
    *,
    spent_s: float,
    min_span_s: float = MIN_SPAN_S,
    cap_rounds: Optional[int] = None,
) -> bool:
    """Whether a decided configuration that has run `done` rounds in `spent_s` seconds
    still gets another `batch`: while its rounds span less than `min_span_s` (see
    `MIN_SPAN_S`), never past `cap_rounds` (default 20 x `batch`, as `may_extend`).

    Args:
        done: rounds run.
        batch: rounds added at a time.
        spent_s: seconds its rounds span.
        min_span_s: the shortest span wanted.
        cap_rounds: the most rounds (None: 20 x `batch`).

    Returns:
        True where it gets another batch.
    """
    return _within_cap(done + batch, batch, cap_rounds) and spent_s < min_span_s


# --- placement ------------------------------------------------------------------------------


def compiled_sdfg_calls(call: Callable[[], Any]) -> list[tuple[Any, int]]:
    """The DaCe compiled SDFGs (`dace.codegen.compiled_sdfg.CompiledSDFG`) that `call`
    runs, each with how often it ran, in the order of their first call (recorded through
    DaCe's compiled-SDFG call hook).

    Args:
        call: the program call, without arguments.

    Returns:
        (compiled SDFG, number of calls) pairs.
    """
    import dace

    seen: list[list] = []

    def note(csdfg: Any, _args: Any) -> None:
        for entry in seen:
            if entry[0] is csdfg:
                entry[1] += 1
                return
        seen.append([csdfg, 1])

    with dace.hooks.on_compiled_sdfg_call(before=note):
        call()
    return [(csdfg, n) for csdfg, n in seen]


def compiled_sdfgs(call: Callable[[], Any]) -> list:
    """The DaCe compiled SDFGs that `call` runs, in the order of their first call
    (`compiled_sdfg_calls` without the counts).

    Args:
        call: the program call, without arguments.

    Returns:
        the compiled SDFGs.
    """
    return [csdfg for csdfg, _ in compiled_sdfg_calls(call)]


def replace_persistent(handles: Sequence[Any]) -> None:
    """Finalize every compiled SDFG of `handles` (`compiled_sdfgs`; a no-op on one not
    initialized): that frees its state and its `PERSISTENT` transients, and its next call
    initializes it again, which allocates them anew (that call touches the new pages: leave
    it untimed). A process otherwise keeps one placement of a build's persistent transients
    for good: `apply_diffusion_to_vn`'s inlined build (`PERSISTENT`, 1 thread) ran
    0.856-0.952x stock from one process to the next, intervals of single runs excluding
    each other, while its A/A pair stayed within 0.984-1.011.

    Args:
        handles: compiled SDFGs (`compiled_sdfgs`).
    """
    for h in handles:
        h.finalize()


# --- threads -------------------------------------------------------------------------------

_OPENMP_NAMES = ("libgomp", "libomp", "libiomp5")


def loaded_openmp() -> Optional[str]:
    """Path of the OpenMP runtime loaded into this process (by a compiled program), or None.

    Returns:
        the path, or None.
    """
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None
    hits = sorted(
        p for p in paths if any(p.rpartition("/")[2].startswith(n) for n in _OPENMP_NAMES)
    )
    return hits[0] if hits else None


def omp_threads(n: int) -> int:
    """Set the OpenMP thread count of the programs already loaded (the calling thread's
    `omp_set_num_threads`); returns `omp_get_max_threads()` afterwards. Raises when no
    OpenMP runtime is loaded yet or the setting did not take.

    Args:
        n: the thread count.

    Returns:
        `omp_get_max_threads()` after setting it.

    Raises:
        RuntimeError: where no OpenMP runtime is loaded, or the setting did not take.
    """
    path = loaded_openmp()
    if path is None:
        raise RuntimeError(
            "no OpenMP runtime loaded in this process (call a compiled program first)"
        )
    lib = ctypes.CDLL(path)
    lib.omp_set_num_threads(ctypes.c_int(n))
    got = int(lib.omp_get_max_threads())
    if got != n:
        raise RuntimeError(f"omp_set_num_threads({n}) in {path}: omp_get_max_threads() is {got}")
    return got
