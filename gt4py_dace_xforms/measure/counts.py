"""Counts that do not depend on the machine: instructions and simulated last-level-cache
misses of one call of a compiled program (issue 31).

Times on the shared 2-core machine scatter by several per cent; instruction counts do not,
and a cache simulator with a GPU-sized last level stands in for device-memory traffic
where no GPU is lent. Lowering and compiling under valgrind is far too slow (a whole gt4py
process under callgrind did not finish the target's second build at 2048 cells in 20
minutes), so:

1. `capture_call(call)` runs a gt4py call natively and records, through DaCe's
   compiled-SDFG call hook, the library it ran and the exact C arguments it passed: the
   arrays' bytes (their extent from the descriptors and the symbol values passed) and
   every scalar, into a folder (`call.json` + one `.bin` per array).
2. `count_call(folder, cache)` replays that call in a fresh Python that imports only
   ctypes (`python .../measure/counts_replay.py FOLDER`, run as a file so that the
   package, dace and gt4py are not imported under valgrind), under
   callgrind with collection on only inside the SDFG's program function (per-call
   transients are allocated there, persistent ones in `__dace_init`, as timed), after the
   inputs were evicted from the simulated caches, with callgrind's cache simulator
   configured as a server CPU (32 MiB L3) or as a GPU-like last level (the H200's 50 MB
   L2, modelled as 48 MiB, 12-way, 128-byte lines: valgrind needs a power-of-two number of
   sets). One thread (`OMP_NUM_THREADS=1`). Valgrind 3.19 does not decode AVX-512, so the
   programs counted are compiled with `-mno-avx512f` (`COUNT_CXXFLAGS`, through gt4py's
   `CXXFLAGS`); everything else is gt4py's own build.

The counts are exact for the code and the inputs: two replays give the same numbers.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable, Optional


#: Cache configurations for callgrind's simulator: (I1, D1, LL), each (bytes, ways, line).
#: Fixed, not read from the host (valgrind would take the host's L3, which a VM may report
#: as hundreds of MB), so that the counts do not depend on the machine either.
CACHES = {
    # a server CPU core's view: 32 KiB L1I, 48 KiB L1D, a 32 MiB 16-way shared L3
    "cpu": ((32768, 8, 64), (49152, 12, 64), (32 * 1024 * 1024, 16, 64)),
    # a GPU-like last level: the H200's 50 MB L2 as 48 MiB, 12 ways, 128-byte lines
    "gpu": ((32768, 8, 64), (49152, 12, 64), (48 * 1024 * 1024, 12, 128)),
}

#: gt4py's CPU flags (workflow/common.py) less AVX-512, which valgrind 3.19 cannot decode.
COUNT_CXXFLAGS = (
    "-fPIC -O3 -march=native -mno-avx512f -Wall -Wextra -Wno-unused-parameter -Wno-unused-label"
)

#: The replay script (run by path: importing the package would import dace and gt4py).
REPLAY = pathlib.Path(__file__).with_name("counts_replay.py")

EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


@dataclasses.dataclass(frozen=True)
class Counts:
    """One replayed call: instructions (`Ir`), data reads and writes, and misses per level."""

    events: dict

    @property
    def instructions(self) -> int:
        """Instructions executed (callgrind's `Ir`)."""
        return self.events["Ir"]

    @property
    def ll_misses(self) -> int:
        """Last-level misses (data read + write, and instruction): memory traffic in lines."""
        return self.events.get("DLmr", 0) + self.events.get("DLmw", 0) + self.events.get("ILmr", 0)


def valgrind() -> Optional[str]:
    """The valgrind binary, or None where it is not installed.

    Returns:
        the path, or None.
    """
    from shutil import which

    return which("valgrind")


def _array_extent(desc, values: dict) -> int:
    """Elements from the data pointer to the last element (strides may be anything)."""
    import dace

    if isinstance(desc, dace.data.Scalar):
        return 1
    shape = [int(dace.symbolic.evaluate(s, values)) for s in desc.shape]
    strides = [int(dace.symbolic.evaluate(s, values)) for s in desc.strides]
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def _buffer_bytes(ptr: int, buffers) -> Optional[int]:
    """Bytes from `ptr` to the end of the memory of the buffer among `buffers` (numpy
    arrays) holding it: the span its strides cover, which `nbytes` understates for a padded
    layout (icon4py's `c_intp` has a stride of 264 over 258 vertices)."""
    import numpy as np

    for b in buffers:
        low, high = np.lib.array_utils.byte_bounds(b)
        if low <= ptr < high:
            return high - ptr
    return None


def capture_call(call: Callable[[], Any], folder: os.PathLike, buffers=()) -> list[pathlib.Path]:
    """Run `call` (one gt4py program call, compiled already or not) and write every
    compiled SDFG call it makes into `folder/<n>/` (`call.json` and the arrays' bytes,
    as they are when the SDFG is entered). Returns those folders, in call order.

    An array's extent comes from its descriptor where the symbols passed determine it;
    gt4py passes strides and range starts but not every shape symbol, so otherwise from
    the one of `buffers` (the numpy arrays behind the call's fields) that holds it.

    Args:
        call: the program call, without arguments.
        folder: where the calls go.
        buffers: the numpy arrays behind the call's fields.

    Returns:
        the folders, in call order.

    Raises:
        RuntimeError: where a call's C arguments cannot be named, or an array's extent is not known
            (its buffer not passed).
    """
    import dace

    root = pathlib.Path(folder)
    written: list[pathlib.Path] = []

    def note(csdfg: Any, callargs: Any) -> None:
        sdfg = csdfg.sdfg
        names = [a for a in csdfg._sig if a not in csdfg._constants]
        if len(names) != len(callargs):
            raise RuntimeError(
                f"counts: cannot name the {len(callargs)} C arguments of {sdfg.name}"
            )
        typedict = csdfg._typedict
        values = {k: v for k, v in sdfg.constants.items()}
        for name, carg in zip(names, callargs):
            desc = typedict[name]
            if not isinstance(desc, dace.data.Array) and hasattr(carg, "value"):
                values[name] = carg.value
        out = root / str(len(written))
        out.mkdir(parents=True, exist_ok=True)
        args = []
        for n, (name, carg) in enumerate(zip(names, callargs)):
            desc = typedict[name]
            if isinstance(desc, dace.data.Array):
                ptr = (
                    carg.value
                    if isinstance(carg, ctypes.c_void_p)
                    else ctypes.cast(carg, ctypes.c_void_p).value
                )
                try:
                    nbytes = _array_extent(desc, values) * desc.dtype.bytes
                except TypeError:
                    # TODO: a NULL pointer (`value` None) reaches _buffer_bytes and string_at
                    nbytes = _buffer_bytes(ptr, buffers)  # type: ignore[arg-type]
                    if nbytes is None:
                        raise RuntimeError(
                            f"counts: the extent of '{name}' is not known: pass its buffer"
                        ) from None
                data = ctypes.string_at(ptr, nbytes) if nbytes else b""  # type: ignore[arg-type]
                (out / f"arg{n}.bin").write_bytes(data)
                args.append({"name": name, "kind": "array", "file": f"arg{n}.bin", "bytes": nbytes})
            else:
                args.append(
                    {
                        "name": name,
                        "kind": "scalar",
                        "ctype": type(carg).__name__,
                        "value": carg.value,
                    }
                )
        init = [i for i, name in enumerate(names) if name in csdfg._free_symbols]
        # A copy of the library: gt4py removes a session's build folder when the process ends.
        shutil.copyfile(csdfg.filename, out / "program.so")
        spec = {
            "library": "program.so",
            "sdfg": sdfg.name,
            "args": args,
            "init": init,
            "code_hash": code_hash(sdfg),
        }
        (out / "call.json").write_text(json.dumps(spec, indent=1))
        written.append(out)

    with dace.hooks.on_compiled_sdfg_call(before=note):
        call()
    return written


def code_hash(sdfg: Any) -> str:
    """DaCe's hash of the compiled SDFG: two builds with the same hash generate the same
    code, so their counts are the same and are replayed once (gt4py keeps no sources).

    Args:
        sdfg: the compiled SDFG.

    Returns:
        the hash.
    """
    return sdfg.hash_sdfg()[:16]


def last_level_bytes(cache: str) -> int:
    """The simulated last level's size.

    Args:
        cache: the cache model's name (`CACHES`).

    Returns:
        the size in bytes.
    """
    return CACHES[cache][2][0]


def _cache_flags(cache: str) -> list[str]:
    config = CACHES[cache]
    return [
        f"--{lvl}={size},{ways},{line}"
        for lvl, (size, ways, line) in zip(("I1", "D1", "LL"), config)
    ]


def count_call(folder: os.PathLike, cache: str = "cpu", timeout: float = 1800) -> Counts:
    """Replay the call in `folder` (`capture_call`) under callgrind; its event totals.

    Args:
        folder: a folder `capture_call` wrote.
        cache: the cache model's name.
        timeout: seconds before the replay is stopped.

    Returns:
        the `Counts`.

    Raises:
        RuntimeError: where valgrind is missing or the replay fails.
    """
    binary = valgrind()
    if binary is None:
        raise RuntimeError("counts: valgrind is not installed")
    spec = json.loads((pathlib.Path(folder) / "call.json").read_text())
    with tempfile.TemporaryDirectory(prefix="counts_") as tmp:
        out = pathlib.Path(tmp) / "callgrind.out"
        # The replay reads the call through a path of fixed length: the path's length moved
        # the interpreter's heap, and with it memcpy's alignment and the instruction count.
        call = pathlib.Path(tmp) / "call"
        call.symlink_to(pathlib.Path(folder).resolve(), target_is_directory=True)
        cmd = [
            binary,
            "--tool=callgrind",
            "--cache-sim=yes",
            "--collect-atstart=no",
            # the SDFG's code: the exported wrapper is inlined; its OpenMP clones end in ']'
            f"--toggle-collect=__program_{spec['sdfg']}_internal(*)",
            f"--callgrind-out-file={out}",
            *_cache_flags(cache),
            sys.executable,
            str(REPLAY),
            str(call),
            str(2 * last_level_bytes(cache)),
        ]
        # A fixed environment: the caller's (its size moves the stack, PYTHONHASHSEED the
        # interpreter's allocations) shifted a few simulated misses between runs.
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OMP_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "LC_ALL": "C",
        }
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if "unhandled instruction" in done.stderr:
            raise RuntimeError(
                "counts: valgrind cannot decode the library's instructions (AVX-512?): compile the "
                "program with CXXFLAGS=counts.COUNT_CXXFLAGS"
            )
        if done.returncode != 0:
            raise RuntimeError(
                f"counts: the replay failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
            )
        return parse_callgrind(out.read_text())


def parse_callgrind(text: str) -> Counts:
    """The `events:` and `totals:` (or `summary:`) lines of a callgrind output file.

    Args:
        text: the output file's text.

    Returns:
        the `Counts`.

    Raises:
        ValueError: where a line is missing.
    """
    events = re.search(r"^events:\s*(.+)$", text, re.M)
    totals = re.search(r"^(?:totals|summary):\s*(.+)$", text, re.M)
    if not events or not totals:
        raise ValueError("counts: no totals in the callgrind output")
    names, values = events.group(1).split(), [int(v) for v in totals.group(1).split()]
    return Counts(dict(zip(names, values + [0] * (len(names) - len(values)))))
