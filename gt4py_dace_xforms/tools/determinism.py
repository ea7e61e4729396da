"""Is the library's output deterministic? The same program, lowered and optimized with the
library's hooks in separate processes with different `PYTHONHASHSEED`, must give the same
SDFG (`hash_sdfg()`): gt4py's build cache and MPI runs (identical code on every rank)
depend on it, and iterating a set of nodes or names is where it breaks (45bf91f fixed one).

`hash_of(spec)` lowers one program to gt4py's final SDFG without compiling (the default
backend's hooks and annotations, `integration.capture`); `check_program(ref)` runs that in
subprocesses, one per seed, and compares. `python -m gt4py_dace_xforms.tools.determinism
MODULE:PROGRAM` prints the hash (what the subprocesses run); `census --determinism` checks
a set of programs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Optional, Sequence


#: Two seeds that order Python's str hashes differently.
SEEDS = (0, 12345)


@dataclasses.dataclass
class ProgramDeterminism:
    """One program's final-SDFG hash per seed (`check_program`), or the error that stopped it."""

    program: str
    hashes: dict[int, str] = dataclasses.field(
        default_factory=dict
    )  # PYTHONHASHSEED -> hash_sdfg()
    seconds: float = 0.0
    error: Optional[str] = None

    @property
    def deterministic(self) -> bool:
        """Whether every seed gave the same hash (and nothing failed)."""
        return self.error is None and len(set(self.hashes.values())) == 1

    @property
    def short_name(self) -> str:
        """The program's name without its module path."""
        return self.program.rpartition(":")[2]


def hash_of(spec: str, grid=None) -> str:
    """`hash_sdfg()` of the final SDFG of `spec` (`MODULE:PROGRAM`) under the default
    backend's hooks, lowered without compiling.

    Args:
        spec: the program, `MODULE:PROGRAM`.
        grid: the grid (a `tools.grid.Grid`; None: a generated one).

    Returns:
        the SDFG's hash.
    """
    from gt4py_dace_xforms.integration.capture import OPTIMIZED, capture_stages
    from gt4py_dace_xforms.integration.hooks import optimization_hooks
    from gt4py_dace_xforms.tools.programs import load_program, offset_provider_for

    program = load_program(spec)
    taken = capture_stages(
        program,
        [OPTIMIZED],
        offset_provider=offset_provider_for(program, grid),
        optimization_hooks=optimization_hooks(),
    )
    return taken[OPTIMIZED].hash_sdfg()


def check_program(ref, seeds: Sequence[int] = SEEDS, timeout: float = 1800) -> ProgramDeterminism:
    """Hash `ref` in one subprocess per seed (never raises: a failure goes to `error`).

    Args:
        ref: the program (`programs.ProgramRef`).
        seeds: the hash seeds (`PYTHONHASHSEED`), one process each.
        timeout: seconds per process.

    Returns:
        the `ProgramDeterminism`.
    """
    result = ProgramDeterminism(ref.spec)
    start = time.perf_counter()
    for seed in seeds:
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        try:
            done = subprocess.run(
                [sys.executable, "-m", __name__, ref.spec],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            result.error = f"PYTHONHASHSEED={seed}: no hash within {timeout:.0f} s"
            break
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            result.error = f"PYTHONHASHSEED={seed}: {tail}"
            break
        result.hashes[seed] = lines[-1]
    result.seconds = time.perf_counter() - start
    return result


def table(results: list[ProgramDeterminism]) -> str:
    """One line per program: deterministic or not (or its error), the first seed's hash, seconds.

    Args:
        results: the checks.

    Returns:
        the table's text.
    """
    lines = ["program  deterministic  hash (first seed)  s"]
    for r in results:
        verdict = (
            "error: " + r.error
            if r.error
            else (
                "yes"
                if r.deterministic
                else "NO: " + ", ".join(f"seed {s} {h[:12]}" for s, h in r.hashes.items())
            )
        )
        first = next(iter(r.hashes.values()), "-")[:16]
        lines.append(f"{r.short_name}  {verdict}  {first}  {r.seconds:.0f}")
    ok = sum(r.deterministic for r in results)
    lines.append(
        f"{ok} of {len(results)} programs give the same SDFG under PYTHONHASHSEED {', '.join(map(str, SEEDS))}"
    )
    return "\n".join(lines)


def to_json(results: list[ProgramDeterminism]) -> str:
    """The checks as JSON.

    Args:
        results: the checks.

    Returns:
        the JSON text.
    """
    return json.dumps(
        [dict(dataclasses.asdict(r), deterministic=r.deterministic) for r in results], indent=2
    )


if __name__ == "__main__":
    from gt4py_dace_xforms.tools.quiet import quiet_third_party

    with quiet_third_party():
        digest = hash_of(sys.argv[1])
    print(digest)
