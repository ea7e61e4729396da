"""`bench/substep.py` as a module for the scripts beside it (run as
`.venv/bin/python bench/substep/NAME.py`, so this folder is on `sys.path`): the name
`substep` is the folder's, so the module is loaded from its file, once."""

import importlib.util
import pathlib
import sys
from types import ModuleType


ROOT = pathlib.Path(__file__).resolve().parents[2]


def substep_bench() -> ModuleType:
    """The module of `bench/substep.py` (loaded on the first call, registered as `bench_substep`).

    Returns:
        the module.
    """
    if "bench_substep" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_substep", ROOT / "bench/substep.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_substep"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules["bench_substep"]
