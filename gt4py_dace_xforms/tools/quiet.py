"""`quiet_third_party()`: the warnings gt4py and DaCe print on every compile, silenced for
the command-line tools' screens (only inside the context: importing changes no filter)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator


@contextlib.contextmanager
def quiet_third_party() -> Iterator[None]:
    """The demo's screen: gt4py warns on every compile that Python runs without -O, DaCe
    on every empty Map and when it loads a library twice; none says anything about the
    demo. Other warnings are shown once. (Only inside the demo: importing the package
    changes no filter.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("once")
        warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
        warnings.filterwarnings("ignore", message=r"The iteration range of Map .* zero or negative sized range")
        # The A/A build's library is the stock one (gt4py caches by content); DaCe loads a copy.
        warnings.filterwarnings("ignore", message=r"Library .* already loaded, renaming file")
        yield
