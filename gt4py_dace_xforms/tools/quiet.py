"""`quiet_third_party()`: the warnings gt4py and DaCe print on every compile, silenced for
the command-line tools' screens (only inside the context: importing changes no filter)."""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Iterator

from gt4py_dace_xforms.integration.workers import restart_build_workers


@contextlib.contextmanager
def quiet_third_party() -> Iterator[None]:
    """The demo's screen: gt4py warns on every compile that Python runs without -O, DaCe
    on every empty Map and when it loads a library twice; none says anything about the
    demo. Other warnings are shown once. gt4py's build workers are other processes, which
    take their filters from `PYTHONWARNINGS` when they start: there DaCe's and gt4py's
    UserWarnings and DeprecationWarnings are ignored (the library's own warnings come back
    from the workers all the same, `integration.workers`). (Only inside the demo: importing
    the package changes no filter.)

    Yields:
        nothing: the warnings are filtered inside the `with` block.
    """
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore::UserWarning,ignore::DeprecationWarning"
    restart_build_workers()  # workers started before would keep their filters
    try:
        with _filters():
            yield
    finally:
        if before is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = before


@contextlib.contextmanager
def _filters() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("once")
        warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
        warnings.filterwarnings(
            "ignore", message=r"The iteration range of Map .* zero or negative sized range"
        )
        # The A/A build's library is the stock one (gt4py caches by content); DaCe loads a copy.
        warnings.filterwarnings("ignore", message=r"Library .* already loaded, renaming file")
        yield
