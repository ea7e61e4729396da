"""Compile a generated program with stock dace and with the library (two policies), run
every build on the same inputs, compare them with each other and with the numpy reference.

Compilation is the cost (seconds per build), so outcomes are kept on disk, keyed by the
program source, the inputs' seed, the builds, and a hash of the library's source and the
gt4py/dace versions: re-running a seed with an unchanged library skips the compilers, and
any edit of `gt4py_dace_xforms` compiles everything afresh. `FUZZ_REUSE=0` turns it off.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
import pathlib
import re
import sys
import time
import traceback
from typing import Callable, Optional

import dace
import gt4py
import gt4py.next as gtx
import numpy as np
from hypothesis import currently_in_test_context, given, note, reject, settings, strategies as st

import gt4py_dace_xforms
from fuzzing.reduce import reduce
from fuzzing.strategy import C2C_TABLE, NC, NL, SENTINEL, Prog, evaluate_numpy, programs, tolerance
from gt4py_dace_xforms.measure.poison import poison_unread
from gt4py_dace_xforms.tools.compare import Build, inline_build, stock_build
from gt4py_dace_xforms.tools.static import compile_static, static_args


_ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Shared by xdist workers: module files and outcomes are written atomically.
FUZZ_DIR = pathlib.Path(os.environ.get("GT4PY_DACE_XFORMS_TEST_BUILD", _ROOT / ".build")) / "fuzz"

#: The library builds compared with stock: the default cost model, and "inline whatever is
#: sound", which takes every rewrite the analysis allows (the hardest test of the rewrite).
LIBRARY_BUILDS: dict[str, Callable[[], Build]] = {
    "sound": lambda: inline_build(policy=gt4py_dace_xforms.InlineWhereSound()),
    "cost_model": lambda: inline_build(),
    # Vertical windows first, then everything sound on the rest: the window rewrite on
    # every program, and composed with the inliner.
    "window": lambda: inline_build(policy=gt4py_dace_xforms.InlineWhereSound(), windows=True),
}

_loaded: dict[str, object] = {}


def load(prog: Prog):
    """The `program` of `prog.source()`, from a module file named by the source's hash
    (gt4py reads the source of field operators, so it must live in a file)."""
    key = prog.key()
    if key not in _loaded:
        path = FUZZ_DIR / "programs" / f"prog_{key}.py"
        # The tree goes along as a comment: `run_fuzz.py --replay <file>` rebuilds the inputs.
        _write_atomic(path, f"{prog.source()}\n# {prog!r}\n".encode())
        spec = importlib.util.spec_from_file_location(f"fuzz_prog_{key}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _loaded[key] = module.program
    return _loaded[key]


def _write_atomic(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == data:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


@functools.cache
def library_fingerprint() -> str:
    h = hashlib.sha256(f"{gt4py.__version__} {dace.__version__}".encode())
    pkg = pathlib.Path(gt4py_dace_xforms.__file__).parent
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


class BuildFailed(Exception):
    """Compiling or running the program with one build raised (`raised`: the exception's
    type name, as `describe_error` gives it)."""

    def __init__(self, build: str, error: Exception):
        self.raised, message = describe_error(error)
        super().__init__(f"{build} build raised {self.raised}: {message}")
        self.build = build


def describe_error(error: BaseException) -> tuple[str, str]:
    """The type name of `error` and its first line, with where it was raised; where a gt4py
    build worker could not send its exception back (pickling failed: sympy's `TypeError:
    cannot determine truth value of Relational` arrives as `AttributeError: Can't pickle
    local object ...`), those of the exception the worker raised, from its traceback."""
    name, message = type(error).__name__, (str(error).splitlines() or [""])[0]
    where = ""
    remote = getattr(error.__cause__, "tb", "")  # concurrent.futures' _RemoteTraceback
    if remote:
        lines = remote.splitlines()
        raised = [
            i
            for i, ln in enumerate(lines)
            if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)(: |$)", ln)
        ]
        pickled = "pickle" in str(error) and len(raised) >= 2
        if pickled:  # the last is the pickling error, the one before what failed
            name, _, message = lines[raised[-2]].partition(": ")
            name = name.rpartition(".")[2]
        # That exception's own traceback: the lines after the exception before it (a chained
        # one; none where the worker's exception arrived without a traceback).
        k = (len(raised) - 2 if pickled else len(raised) - 1) if raised else None
        block = lines[
            (raised[k - 1] + 1 if k else 0) : (raised[k] if k is not None else len(lines))
        ]
        frames = [m for m in (re.match(r'^ *File "(.*)", line (\d+)', ln) for ln in block) if m]
        if frames:  # the innermost frame of that exception
            where = f"{os.path.basename(frames[-1][1])}:{frames[-1][2]}"
    elif error.__traceback__ is not None:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return name, " ".join(part for part in (message, f"(at {where})" if where else "") if part)


@dataclasses.dataclass
class Outcome:
    """Per build: the output arrays, and how many (intermediate, consumer) pairs it inlined."""

    outputs: dict[str, list[np.ndarray]]
    applied: dict[str, int]
    reused: bool = False
    folded: dict[str, int] = dataclasses.field(
        default_factory=dict
    )  # copy-chain arrays per library build
    retargeted: dict[str, int] = dataclasses.field(
        default_factory=dict
    )  # write-back buffers per library build
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # compile and run
    #: unordered accesses the library found in gt4py's SDFG (`InlineReport.races`), per library build
    races: dict[str, int] = dataclasses.field(default_factory=dict)
    #: intermediates removed by a vertical window, per library build
    windowed: dict[str, int] = dataclasses.field(default_factory=dict)
    #: write-back buffers replaced by the output they are copied into, per library build
    outbuf: dict[str, int] = dataclasses.field(default_factory=dict)
    #: scan reads narrowed to the Map iteration's column (`NestedColumnRead`), per library build
    columns: dict[str, int] = dataclasses.field(default_factory=dict)
    #: intermediates whose split writers were merged into one Map, per library build
    merged: dict[str, int] = dataclasses.field(default_factory=dict)


#: What each library build's report counted: the `Outcome` field, and how to read it off
#: the build's `InlineReport` (stored per build in the cached outcome as `field/build`).
COUNTERS: dict[str, Callable] = {
    "applied": lambda r: len(r.applied),
    "races": lambda r: len(r.races),
    "windowed": lambda r: len(r.windowed),
    "folded": lambda r: r.copy_chains_removed,
    "retargeted": lambda r: len(r.writebacks_retargeted),
    "outbuf": lambda r: len(r.outputs_as_buffers),
    "columns": lambda r: len(r.column_reads),
    "merged": lambda r: len(r.fragments_merged),
}

#: What `Stats` tallies per library build (programs where the counter is not zero): its
#: field, the `Outcome` counter, and the words of the summary and the progress log.
TALLIES = (
    ("inlined", "applied", "inlined something"),
    ("outbuf", "outbuf", "output as buffer"),
    ("columns", "columns", "column reads"),
    ("merged", "merged", "split writers merged"),
)


def offset_provider(prog: Prog) -> dict:
    """The `C2C` table for programs that read through it (`strategy.C2C_TABLE`)."""
    if not prog.uses_neighbors():
        return {}
    cell = gtx.Dimension("Cell")
    local = gtx.Dimension("C2C", kind=gtx.DimensionKind.LOCAL)
    return {"C2C": gtx.as_connectivity([cell, local], cell, C2C_TABLE.copy())}


def _as_gt4py(prog: Prog, args: dict) -> dict:
    cell, k = gtx.Dimension("Cell"), gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
    out = {}
    for name, v in args.items():
        if name in prog.fields:
            out[name] = gtx.as_field([cell, k], v.copy())
        elif name in prog.cells:
            out[name] = gtx.as_field([cell], v.copy())
        else:
            out[name] = v
    for name in prog.out_names():
        out[name] = gtx.as_field([cell, k], np.full((NC, NL), SENTINEL, dtype=prog.dtype))
    return out


#: Suffix of the outputs of a second call on poisoned inputs (`measure.poison`).
POISONED = "+poisoned"


def run_builds(prog: Prog, args: dict, builds: tuple[str, ...]) -> Outcome:
    """Compile and run with each of `builds` ("stock" or keys of `LIBRARY_BUILDS`); then,
    where a library build is among them, call every build again on inputs that are NaN
    wherever gt4py's domain inference says the program does not read them (taken from
    the library build's annotations): outputs under `name + POISONED`."""
    program = load(prog)
    outcome = Outcome({}, {})
    made, runs = {}, {}
    # One table for every call: a static build's variant is selected by its identity too.
    provider = offset_provider(prog)
    for name in builds:
        build = made[name] = stock_build() if name == "stock" else LIBRARY_BUILDS[name]()
        a = _as_gt4py(prog, args)
        start = time.perf_counter()
        try:
            runs[name] = _compiled(prog, program, build, args, provider)
            runs[name](**a, offset_provider=provider)
        except Exception as e:
            raise BuildFailed(name, e) from e
        outcome.seconds[name] = time.perf_counter() - start
        outcome.outputs[name] = [a[o].asnumpy() for o in prog.out_names()]
        if name != "stock":
            report = build.report
            for field, count in COUNTERS.items():
                getattr(outcome, field)[name] = count(report)
            if report.records and currently_in_test_context():
                note(f"{name} build, inlining report:\n{report.table()}")
    annotated = next((b.sdfg for n, b in made.items() if n != "stock"), None)
    if annotated is None:
        return outcome
    for name in made:
        a = poison_unread(annotated, _as_gt4py(prog, args))
        try:
            runs[name](**a, offset_provider=provider)
        except Exception as e:
            raise BuildFailed(name, e) from e  # on poisoned inputs
        outcome.outputs[name + POISONED] = [a[o].asnumpy() for o in prog.out_names()]
    return outcome


def _compiled(prog: Prog, program, build: Build, args: dict, provider: dict):
    """The program with `build`'s backend: JIT-compiled on the first call, or, for a static
    `prog`, compiled first with its int32 and bool arguments as constants (`tools.static`),
    for `provider`, the tables every call then passes."""
    if not prog.static:
        return program.with_backend(build.backend)
    return compile_static(program, build.backend, static_args(args), provider)


def _cache_path(prog: Prog, data_seed: int, builds: tuple[str, ...]) -> pathlib.Path:
    # `repr(prog)`, not only its source: the values of its int32/bool arguments (levels,
    # a runtime K domain, flags) are not in the source text.
    key = hashlib.sha256(
        f"{prog!r}\0{data_seed}\0{builds}\0{library_fingerprint()}".encode()
    ).hexdigest()[:24]
    return FUZZ_DIR / "outcomes" / f"{key}.npz"


def run_cached(prog: Prog, data_seed: int, builds: tuple[str, ...]) -> Outcome:
    path = _cache_path(prog, data_seed, builds)
    reuse = os.environ.get("FUZZ_REUSE", "1") != "0"
    if reuse and path.exists():
        with np.load(path) as z:
            names = {k.rpartition("/")[0] for k in z.files if k.partition("/")[0] not in COUNTERS}
            outputs = {b: [z[f"{b}/{i}"] for i in range(len(prog.out_names()))] for b in names}
            library = [b for b in builds if b != "stock"]
            counted = {
                field: {b: int(z[f"{field}/{b}"]) for b in library if f"{field}/{b}" in z.files}
                for field in COUNTERS
            }
        # A counter an older cache file lacks is missing, not zero: the run is repeated.
        if all(len(c) == len(library) for c in counted.values()):
            return Outcome(outputs, reused=True, **counted)
    outcome = run_builds(prog, prog.call_args(data_seed), builds)
    arrays = {f"{b}/{i}": o for b, outs in outcome.outputs.items() for i, o in enumerate(outs)}
    for field in COUNTERS:
        arrays |= {f"{field}/{b}": np.int64(n) for b, n in getattr(outcome, field).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return outcome


def compare(prog: Prog, args: dict, outcome: Outcome) -> None:
    """Every build equals the numpy reference inside the domain (up to the rounding bound)
    and left the sentinel outside; library builds equal stock up to the same bound. Calls
    on poisoned inputs (`POISONED`) too: a value read outside what the program reads
    turns an output into NaN.

    Where the library found an unordered access in gt4py's SDFG (`Outcome.races`: an
    output written, read shifted and overwritten in one state), the outputs involved
    (`out0`, `outR`) have no defined value: there every library build must equal stock
    bit for bit (the library left the order as it was). Where it found none, numpy
    decides as everywhere, so a race it missed shows when stock goes wrong."""
    ref = evaluate_numpy(prog, args)
    tol = tolerance(prog, args)
    racy = any(outcome.races.values()) and prog.overwrite
    for i, (out, ((c0, c1), (k0, k1))) in enumerate(zip(prog.out_names(), prog.out_domains())):
        inside = np.zeros((NC, NL), dtype=bool)
        inside[c0:c1, k0:k1] = True
        undefined = racy and out in ("out0", "outR")
        # Where stock itself reads a poisoned element (its output turns NaN where numpy has a
        # value), domain inference's "unread" does not hold for this output: the poisoned
        # calls can judge no build there (the clean calls still do).
        poison_void = not undefined and _stock_reads_poison(outcome, i, ref[i], tol[i], inside)
        for name, outs in outcome.outputs.items():
            if poison_void and name.endswith(POISONED):
                continue
            build, got = name.removesuffix(POISONED), outs[i]
            what = f"{name} build, {out}"
            stock = outcome.outputs.get("stock" + name[len(build) :], [None] * (i + 1))[i]
            if undefined:
                if name.startswith("stock") or stock is None:
                    continue
                if not np.array_equal(got, stock, equal_nan=True):
                    idx = np.argwhere(~((got == stock) | (np.isnan(got) & np.isnan(stock))))[
                        :5
                    ].tolist()
                    raise Mismatch(
                        f"{what}: racy output differs from stock's bits, at (cell, k) {idx}",
                        ("stock", build),
                    )
                continue
            outside = got[~inside]
            if not np.all(outside == SENTINEL):
                idx = np.argwhere(~inside & (got != SENTINEL))[:5].tolist()
                raise Mismatch(f"{what}: written outside the domain, at (cell, k) {idx}", (build,))
            _close(got, ref[i], tol[i], inside, f"{what} vs numpy", (build,))
            if name != "stock" and "stock" in outcome.outputs:
                _close(
                    got,
                    outcome.outputs["stock"][i],
                    2 * tol[i],
                    inside,
                    f"{what} vs stock",
                    ("stock", build),
                )


def _stock_reads_poison(outcome: Outcome, i: int, want, atol, inside) -> bool:
    """Stock's clean output `i` matches numpy but its poisoned one does not."""
    clean, poisoned = outcome.outputs.get("stock"), outcome.outputs.get("stock" + POISONED)
    if clean is None or poisoned is None:
        return False

    def close(got) -> bool:
        return bool(
            np.all(~inside | (np.abs(got.astype(np.float64) - want.astype(np.float64)) <= atol))
        )

    return close(clean[i]) and not close(poisoned[i])


def _close(got, want, atol, inside, what, builds) -> None:
    bad = inside & ~(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= atol)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        raise Mismatch(
            f"{what}: {int(bad.sum())} of {int(inside.sum())} elements differ, at (cell, k) {idx.tolist()}:"
            f" got {got[bad][:5]}, want {want[bad][:5]}, tolerance {atol[bad][:5]}",
            builds,
        )


ALL_BUILDS = ("stock", *LIBRARY_BUILDS)


class Mismatch(AssertionError):
    """An output differs; `builds` are the builds needed to see it again."""

    def __init__(self, message: str, builds: tuple[str, ...]):
        super().__init__(message)
        self.builds = builds


class FuzzFailure(AssertionError):
    """A generated program on which the builds or numpy disagree (or a build raised).
    `signature` tells failures apart: the builds involved and what went wrong."""

    def __init__(self, message: str, prog: Prog, data_seed: int, signature: tuple):
        super().__init__(message)
        self.prog, self.data_seed, self.signature = prog, data_seed, signature


def check(prog: Prog, data_seed: int, builds: tuple[str, ...]) -> Outcome:
    """The property: every build agrees with numpy, library builds with stock (FuzzFailure)."""
    try:
        outcome = run_cached(prog, data_seed, builds)
        compare(prog, prog.call_args(data_seed), outcome)
    except BuildFailed as e:
        raise FuzzFailure(str(e), prog, data_seed, ((e.build,), "raised", e.raised)) from e
    except Mismatch as e:
        raise FuzzFailure(
            str(e), prog, data_seed, (e.builds, "mismatch", str(e).split(":")[0])
        ) from e
    return outcome


@dataclasses.dataclass
class Stats:
    """What a fuzzing run did: programs checked (distinct sources), how many compiled
    rather than reused, and per library build how many inlined something.

    `failure`: the first failing example. From then on only the builds that showed it
    are run (hypothesis replays it; the reducer compiles one or two builds per step).
    """

    programs: int = 0
    compiled: int = 0
    inlined: dict[str, int] = dataclasses.field(default_factory=dict)
    #: per library build, how many programs had a write-back buffer replaced by its output
    outbuf: dict[str, int] = dataclasses.field(default_factory=dict)
    #: per library build, how many programs had a scan read narrowed to its column
    columns: dict[str, int] = dataclasses.field(default_factory=dict)
    #: per library build, how many programs had split writers merged into one Map
    merged: dict[str, int] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    #: programs stock itself cannot build (gt4py's bugs, not the library's): skipped
    stock_failures: list = dataclasses.field(default_factory=list)
    failure: Optional[FuzzFailure] = None
    _seen: set = dataclasses.field(default_factory=set)
    #: Called with one line per new program (the long run prints progress).
    log: Optional[Callable[[str], None]] = None

    @property
    def builds(self) -> tuple[str, ...]:
        return self.failure.signature[0] if self.failure else ALL_BUILDS

    def summary(self) -> str:
        tallies = "".join(
            f"{words}: {', '.join(f'{b} {n}' for b, n in getattr(self, field).items()) or '-'}; "
            for field, _, words in TALLIES
        )
        return (
            f"{self.programs} generated programs checked ({self.compiled} compiled, "
            f"{self.programs - self.compiled} reused) in {self.seconds:.0f} s; {tallies}"
            f"stock itself failed on {len(self.stock_failures)} (skipped)"
        )


def check_program(prog: Prog, data_seed: int, stats: Stats) -> None:
    """`check()` with the bookkeeping of `stats`; the first failure is kept there."""
    note(f"generated program (inputs seeded with {data_seed}):\n{prog.source()}")
    start = time.perf_counter()
    try:
        outcome = check(prog, data_seed, stats.builds)
    except FuzzFailure as e:
        if e.signature[0] == ("stock",) and e.signature[1] == "raised" and stats.failure is None:
            # gt4py's own bug: the property is about what the library does with what stock
            # builds, so the draw is skipped (and listed), not a failure that ends the run.
            stats.stock_failures.append((prog.key(), data_seed, str(e).splitlines()[0][:300]))
            if stats.log:
                stats.log(
                    f"stock itself fails (gt4py), skipped: prog_{prog.key()}: {str(e).splitlines()[0][:200]}"
                )
            reject()
        if stats.failure is None:
            stats.failure = e
            if stats.log:
                stats.log(f"FAILED: {str(e).splitlines()[0][:300]}")
        raise
    finally:
        took = time.perf_counter() - start
        stats.seconds += took
    key = (prog.key(), data_seed)
    if stats.failure is None and key not in stats._seen:
        stats._seen.add(key)
        stats.programs += 1
        stats.compiled += not outcome.reused
        for field, counter, _ in TALLIES:
            tally = getattr(stats, field)
            for b, n in getattr(outcome, counter).items():
                tally[b] = tally.get(b, 0) + (n > 0)
        if stats.log:
            applied = " ".join(f"{b}={n}" for b, n in outcome.applied.items())
            buffers = "".join(
                f", {words} {b}={n}"
                for _, counter, words in TALLIES[1:]  # the first, inlined, is `applied`
                for b, n in getattr(outcome, counter).items()
                if n
            )
            stats.log(
                f"#{stats.programs} prog_{prog.key()} {'static ' if prog.static else ''}"
                f"{prog.layout() + ', ' if prog.zones else ''}"
                f"{prog.run_time_bounds() + ', ' if prog.run_time_bounds() else ''}{prog.dtype}, "
                f"{prog.n_ops()} operations: inlined {applied}{buffers}"
                f" ({'reused' if outcome.reused else 'compiled in ' + ', '.join(f'{b} {t:.0f}' for b, t in outcome.seconds.items()) + ' s'})"
            )


def run_property(
    hyp_settings: settings,
    stats: Stats,
    reduce_seconds: float,
    stop: Callable[[], bool] = lambda: False,
    strategy: st.SearchStrategy[Prog] = programs(),
) -> None:
    """Run the property on programs from `strategy` under `hyp_settings`; examples drawn
    once `stop()` holds are skipped. A failure is reduced (`fuzzing.reduce`) and raised as
    a FuzzFailure whose message holds the minimal program's gt4py source."""

    @hyp_settings
    @given(prog=strategy, data_seed=st.integers(0, 2**16))
    def prop(prog, data_seed):
        # Not once a failure was seen: hypothesis replays it and must see it fail again.
        if stats.failure is None and stop():
            return
        check_program(prog, data_seed, stats)

    try:
        prop()
    except Exception:
        if stats.failure is None:
            raise  # not the property failing: a bug in the fuzzer
    if stats.failure is None:
        return
    first = stats.failure
    if stats.log:
        stats.log(
            f"reducing the failing program ({first.prog.n_ops()} operations) for up to {reduce_seconds:.0f} s"
        )
    prog, data_seed = reduce_failure(first, reduce_seconds, stats.log)
    try:
        check(prog, data_seed, first.signature[0])
    except FuzzFailure as e:
        minimal = e
    else:  # cannot happen unless a build is nondeterministic: report the original
        minimal = first
    raise FuzzFailure(
        f"{minimal}\n--- minimal generated program (inputs: Prog.call_args({minimal.data_seed})) ---\n"
        f"{minimal.prog.source()}\n--- as first generated ---\n{first.prog.source()}",
        minimal.prog,
        minimal.data_seed,
        minimal.signature,
    ) from first


def reduce_failure(failure: FuzzFailure, seconds: float, log=None) -> tuple[Prog, int]:
    """The smallest program (and inputs' seed) that fails as `failure` did: the same
    builds, the same kind of failure (`FuzzFailure.signature`)."""
    builds, signature = failure.signature[0], failure.signature

    def fails(prog: Prog, data_seed: int) -> bool:
        try:
            check(prog, data_seed, builds)
        except FuzzFailure as e:
            if e.signature != signature:
                return False
            if "stock" in builds:
                return True
            # A library build alone (raised, or differs from numpy): the candidate counts only
            # where stock builds it and equals numpy, else the reduction could end on a program
            # gt4py itself rejects (the same exception type from gt4py's frontend or lowering).
            try:
                check(prog, data_seed, ("stock",))
            except FuzzFailure:
                return False
            return True
        return False

    return reduce(failure.prog, failure.data_seed, fails, seconds, log)
