"""Which per-call transients get fresh pages: the allocator regime the CPU cost model prices.

gt4py's CPU code allocates its transients on every call (`new` / `delete[]`, glibc's
`malloc`). glibc serves a block from its heap, whose memory the last call freed and the
next call reuses, unless the block is at least the *mmap threshold*: then it maps fresh
pages, which the kernel zeroes on first touch, and unmaps them on free. glibc's threshold
starts at 128 KiB and rises to the largest mapped block freed so far, up to 32 MiB on a
64-bit system (`DEFAULT_MMAP_THRESHOLD_MAX`). So in a model run, after the first calls:

* arrays of 32 MiB or more (a production grid: 327 680 cells x 80 levels x 8 B = 210 MB)
  get fresh pages on every call: removing such a transient saves its allocation and its
  page faults, which is what the CPU cost model's fit measured (docs/cost_model.md);
* smaller arrays (R2B4: 20 480 x 80 x 8 B = 13 MB) reuse the heap: removing one saves
  only its traffic, which the fit found worth nothing measurable, so rewrites that
  recompute points or sweep a column cost time for nothing (measured: the static target on
  a global layout 1.06x slower than stock under glibc's default, issue 48).

`fresh_page_bytes()` is the smallest array, in bytes, that this process gives fresh pages
on every call. Where it comes from, first match wins:

1. `set_fresh_page_bytes(n)` in this process (`measure.timing.pin_allocator` calls it:
   `fresh` 128 KiB, `reuse` and `glibc` 32 MiB); it also sets the environment variable
   below, so that build worker processes see the same value;
2. `GT4PY_DACE_XFORMS_FRESH_PAGE_BYTES` (bytes; 0: every array gets fresh pages);
3. glibc's own settings, where the user fixed the threshold: `MALLOC_MMAP_THRESHOLD_`, or
   `glibc.malloc.mmap_threshold` in `GLIBC_TUNABLES`;
4. glibc's default: 32 MiB.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional


ENV = "GT4PY_DACE_XFORMS_FRESH_PAGE_BYTES"
#: glibc's largest dynamic mmap threshold on a 64-bit system (DEFAULT_MMAP_THRESHOLD_MAX).
GLIBC_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024

_set: list[int] = []


def set_fresh_page_bytes(nbytes: Optional[int]) -> None:
    """Tell the cost model the smallest array this process maps fresh on every call
    (None: forget a value set before). Also sets the environment variable `ENV`, so
    that build workers started later read the same value.

    Args:
        nbytes: the size in bytes, or None.

    Raises:
        ValueError: `nbytes` is negative.
    """
    _set.clear()
    if nbytes is None:
        os.environ.pop(ENV, None)
        return
    if int(nbytes) < 0:
        raise ValueError(f"fresh page bytes must be >= 0, not {nbytes}")
    _set.append(int(nbytes))
    os.environ[ENV] = str(int(nbytes))


@contextlib.contextmanager
def fresh_pages_from(nbytes: Optional[int]) -> Iterator[int]:
    """`set_fresh_page_bytes(nbytes)` for the duration of a `with` block (None: leave it as
    it is), then the value and the variable as they were.

    Args:
        nbytes: the size in bytes, or None.

    Yields:
        The value in force in the block (`fresh_page_bytes()`).

    Raises:
        ValueError: `nbytes` is negative.
    """
    saved_set, saved_env = list(_set), os.environ.get(ENV)
    if nbytes is not None:
        set_fresh_page_bytes(nbytes)
    try:
        yield fresh_page_bytes()
    finally:
        _set[:] = saved_set
        if saved_env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = saved_env


def _parse(value: str, where: str) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        raise ValueError(f"{where}={value!r} is not a number of bytes") from None
    if n < 0:
        raise ValueError(f"{where}={value!r} is negative")
    return n


def fresh_page_bytes() -> int:
    """The smallest per-call array, in bytes, that gets fresh pages on every call in this
    process (see the module docstring for where the value comes from).

    Returns:
        The value set by `set_fresh_page_bytes`, else `ENV`'s, else glibc's mmap
        threshold from `MALLOC_MMAP_THRESHOLD_` or `GLIBC_TUNABLES`, else
        `GLIBC_MMAP_THRESHOLD_MAX`.

    Raises:
        ValueError: one of those variables does not hold a non-negative byte count.
    """
    if _set:
        return _set[0]
    if os.environ.get(ENV, "").strip():
        return _parse(os.environ[ENV].strip(), ENV)
    if os.environ.get("MALLOC_MMAP_THRESHOLD_", "").strip():
        return _parse(os.environ["MALLOC_MMAP_THRESHOLD_"].strip(), "MALLOC_MMAP_THRESHOLD_")
    for item in os.environ.get("GLIBC_TUNABLES", "").replace(":", " ").split():
        name, _, value = item.partition("=")
        if name == "glibc.malloc.mmap_threshold" and value:
            return _parse(value, "GLIBC_TUNABLES glibc.malloc.mmap_threshold")
    return GLIBC_MMAP_THRESHOLD_MAX
