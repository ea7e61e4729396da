"""`make fuzz`: the generated-program property of tests/test_fuzz_programs.py, for a time
budget instead of a fixed number of examples.

Hypothesis has no wall-clock budget, so this runs batches of examples, each batch from
its own seed, until FUZZ_SECONDS (default 1800) have passed; examples drawn after that
return without compiling. A failure is reduced to a minimal program (for up to
FUZZ_REDUCE_SECONDS), printed with its gt4py source, stored in .build/fuzz/hypothesis-db
(replayed first by the next run) and ends the run with exit status 1.

Environment: FUZZ_SECONDS, FUZZ_SEED (default: random; printed, to repeat a run),
FUZZ_BATCH (examples per batch, default 10), FUZZ_MAX_DEPTH (expression depth, default 2),
FUZZ_REDUCE_SECONDS (default 1800),
FUZZ_REUSE=0 (compile even when an outcome of the same program and library source is stored).

`run_fuzz.py --replay .build/fuzz/programs/prog_<key>.py [data_seed]` checks one stored
program again (each build's compile-and-run time), and reduces it if it fails.
"""

from __future__ import annotations

import os
import pathlib
import random
import sys
import time
import warnings


_ROOT = pathlib.Path(__file__).resolve().parents[2]
_BUILD = pathlib.Path(os.environ.get("GT4PY_DACE_XFORMS_TEST_BUILD", _ROOT / ".build"))
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", str(_BUILD / "fuzz-long" / "gt4py"))
os.environ.setdefault(
    "GT4PY_DACE_XFORMS_STRICT", "1"
)  # a failing rewrite is a finding, not stock's result
sys.path.insert(0, str(_ROOT / "tests"))
# gt4py warns on every compile (unoptimised Python, concat_where rules): not findings.
warnings.filterwarnings("ignore", category=UserWarning)

import dace  # noqa: E402
from hypothesis import seed, settings  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402


dace.Config.set("default_build_folder", value=str(_BUILD / "fuzz-long" / "dacecache"))
dace.Config.set("debugprint", value=False)

from fuzzing.runner import (  # noqa: E402
    ALL_BUILDS,
    FUZZ_DIR,
    FuzzFailure,
    Stats,
    check,
    reduce_failure,
    run_property,
)
from fuzzing.strategy import programs  # noqa: E402


def replay(path: str, data_seed: int, reduce_seconds: float) -> int:
    """Check one stored program (.build/fuzz/programs/prog_*.py) again, compiling afresh;
    if it fails, reduce it as a failure of the fuzzing run would be."""
    from fuzzing import strategy

    os.environ["FUZZ_REUSE"] = "0"
    last = pathlib.Path(path).read_text().rstrip().splitlines()[-1]
    prog = eval(last.removeprefix("# "), vars(strategy))  # the repr `load()` appended
    try:
        outcome = check(prog, data_seed, ALL_BUILDS)
    except FuzzFailure as e:
        print(f"FAILED: {str(e).splitlines()[0]}", flush=True)
        prog, data_seed = reduce_failure(e, reduce_seconds, print)
        print(f"minimal (inputs: Prog.call_args({data_seed})):\n{prog.source()}\n# {prog!r}")
        return 1
    times = ", ".join(f"{b} {t:.1f} s" for b, t in outcome.seconds.items())
    print(f"passed; inlined {outcome.applied}; compile and run: {times}")
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--replay":
        reduce_seconds = float(os.environ.get("FUZZ_REDUCE_SECONDS", "1800"))
        return replay(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0, reduce_seconds)
    budget = float(os.environ.get("FUZZ_SECONDS", "1800"))
    base_seed = int(os.environ.get("FUZZ_SEED") or random.randrange(2**32))
    batch = int(os.environ.get("FUZZ_BATCH", "10"))
    # Depth 3 draws programs gt4py itself takes minutes to optimise (a dozen concat_where
    # with runtime bounds); depth 2 checks several times more programs per hour.
    strategy = programs(max_locals=3, max_depth=int(os.environ.get("FUZZ_MAX_DEPTH", "2")))
    reduce_seconds = float(os.environ.get("FUZZ_REDUCE_SECONDS", "1800"))
    start = time.perf_counter()

    def log(line: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f} s] {line}", flush=True)

    def out_of_time() -> bool:
        return time.perf_counter() - start >= budget

    stats = Stats(log=log)
    log(f"fuzzing for {budget:.0f} s, FUZZ_SEED={base_seed}")
    database = DirectoryBasedExampleDatabase(str(FUZZ_DIR / "hypothesis-db"))
    failure, n_batch = None, 0
    while not out_of_time():
        profile = settings(settings.get_profile("fuzz-long"), max_examples=batch, database=database)
        n_batch += 1
        try:
            run_property(
                lambda f, n_batch=n_batch, profile=profile: seed(base_seed + n_batch - 1)(
                    profile(f)
                ),
                stats,
                reduce_seconds,
                out_of_time,
                strategy,
            )
        except FuzzFailure as e:
            failure = e
            log(f"FAILED in batch {n_batch} (seed {base_seed + n_batch - 1}):\n{e}")
            break
    wall = time.perf_counter() - start
    print(
        f"\nfuzz summary: {stats.summary()}; wall time {wall:.0f} s, {n_batch} batches, FUZZ_SEED={base_seed};"
        f" {'FAILED' if failure else 'no failure'}"
    )
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
