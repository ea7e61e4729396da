"""Replay one compiled-SDFG call written by `counts.capture_call`: load the library, pass
the recorded arguments, call `__dace_init_<name>`, `__program_<name>` once, then
`__dace_exit_<name>`. Imports only the standard library (it runs under valgrind; see
`counts.py`). Usage: `python counts_replay.py FOLDER [EVICT_BYTES]`."""

import ctypes
import json
import pathlib
import sys


def main(folder: str) -> None:
    """Load the library of the call captured in `folder` (`counts.capture_call`), initialize its
    SDFG, call it once on the captured arrays and finalize it: what callgrind counts.

    Args:
        folder: the captured call's folder.

    Raises:
        SystemExit: where the SDFG's initialization fails.
    """
    root = pathlib.Path(folder)
    spec = json.loads((root / "call.json").read_text())
    lib = ctypes.CDLL(
        str((root / spec["library"]).absolute())
    )  # not resolved: a path of fixed length
    keep = []  # the arrays' buffers stay alive for the call
    args = []
    for a in spec["args"]:
        if a["kind"] == "array":
            data = (root / a["file"]).read_bytes()
            buf = ctypes.create_string_buffer(data, max(len(data), 1))
            keep.append(buf)
            args.append(ctypes.cast(buf, ctypes.c_void_p))
        else:
            args.append(getattr(ctypes, a["ctype"])(a["value"]))
    name = spec["sdfg"]
    evict = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    if evict:
        # Writing a buffer twice the simulated last level evicts the inputs just read from
        # the files: the call starts cold, as a device's reads from its memory do.
        scratch = (ctypes.c_char * evict)()
        ctypes.memset(ctypes.addressof(scratch), 1, evict)
        del scratch
    init = getattr(lib, f"__dace_init_{name}")
    init.restype = ctypes.c_void_p
    handle = ctypes.c_void_p(init(*[args[i] for i in spec["init"]]))
    if not handle.value:
        raise SystemExit(f"__dace_init_{name} failed")
    program = getattr(lib, f"__program_{name}")
    program(handle, *args)
    finish = getattr(lib, f"__dace_exit_{name}")
    finish.restype = ctypes.c_int
    if finish(handle) != 0:
        raise SystemExit(f"__dace_exit_{name} reported an error")


if __name__ == "__main__":
    main(sys.argv[1])
