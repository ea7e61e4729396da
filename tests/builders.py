"""Hand-built SDFGs in the shape gt4py emits, and compile-and-compare helpers."""

from __future__ import annotations

import copy
import functools
from typing import Mapping, Optional, Sequence

import dace
import numpy as np
from dace.sdfg import nodes as dn


def producer_consumer(
    name: str,
    *,
    params: Sequence[str] = ("i", "k"),
    shape: Sequence[str] = ("N", "K"),
    producer_ranges: Mapping[str, str],
    consumer_ranges: Mapping[str, str],
    write: str,
    reads: Sequence[str],
    input_index: Optional[str] = None,
    out_index: Optional[str] = None,
    producer_code: str = "__out = 2.0 * __a + 1.0",
    consumer_code: Optional[str] = None,
    dtype=dace.float64,
    symbols: Sequence[str] = (),
    tmp_transient: bool = True,
    write_wcr: Optional[str] = None,
) -> dace.SDFG:
    """`tmp[write] = f(a[input_index])` in one Map, `out[out_index] = g(tmp[reads...])` in another.

    Index strings use the Map parameters `params` (same names in both Maps, as gt4py
    emits them). Each entry of `reads` becomes one edge into the consumer tasklet,
    connector `__t<n>`; the default consumer code sums them with alternating weights.
    """
    sdfg = dace.SDFG(name)
    for s in symbols:
        sdfg.add_symbol(s, dace.int32)
    sdfg.add_array("a", list(shape), dtype)
    sdfg.add_array("out", list(shape), dtype)
    sdfg.add_array("tmp", list(shape), dtype, transient=tmp_transient)
    state = sdfg.add_state("main")
    a, tmp, out = state.add_access("a"), state.add_access("tmp"), state.add_access("out")
    state.add_mapped_tasklet(
        "producer",
        dict(producer_ranges),
        inputs={"__a": dace.Memlet(f"a[{input_index or write}]")},
        code=producer_code,
        outputs={"__out": dace.Memlet(f"tmp[{write}]", wcr=write_wcr)},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"tmp": tmp},
    )
    conns = {f"__t{n}": dace.Memlet(f"tmp[{r}]") for n, r in enumerate(reads)}
    code = consumer_code or "__o = " + " + ".join(f"{n + 1}.0 * __t{n}" for n in range(len(reads)))
    state.add_mapped_tasklet(
        "consumer",
        dict(consumer_ranges),
        inputs=conns,
        code=code,
        outputs={"__o": dace.Memlet(f"out[{out_index or write}]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"out": out},
    )
    sdfg.validate()
    return sdfg


def transient_arrays(sdfg: dace.SDFG, ndim: Optional[int] = None) -> list[str]:
    """Names of transient arrays (of `ndim` dimensions if given) in the top-level SDFG."""
    return sorted(
        name
        for name, desc in sdfg.arrays.items()
        if desc.transient
        and not isinstance(desc, dace.data.Scalar)
        and (ndim is None or len(desc.shape) == ndim)
    )


def inlined_copies(sdfg: dace.SDFG) -> int:
    """Number of nested SDFGs the inliner inserted (top level states)."""
    return sum(
        1
        for st in sdfg.states()
        for n in st.nodes()
        if isinstance(n, dn.NestedSDFG) and n.label.startswith("inline_")
    )


@functools.lru_cache(maxsize=None)
def _compile_json(js: str, name: str):
    sdfg = dace.SDFG.from_json(__import__("json").loads(js))
    sdfg.name = name
    return sdfg.compile()


def compile_cached(sdfg: dace.SDFG, tag: str):
    """Compile `sdfg` once per (structure, tag) in this process; identical SDFGs share a build."""
    js = __import__("json").dumps(sdfg.to_json())
    return _compile_json(js, f"{sdfg.name}_{tag}")


def run(
    sdfg: dace.SDFG, tag: str, arrays: Mapping[str, np.ndarray], symbols: Mapping[str, int]
) -> dict:
    """Compile (cached) and run `sdfg` on copies of `arrays`; return the arrays afterwards."""
    args = {k: v.copy() for k, v in arrays.items()}
    compile_cached(sdfg, tag)(**args, **symbols)
    return args


def compare_before_after(
    before: dace.SDFG,
    after: dace.SDFG,
    arrays: Mapping[str, np.ndarray],
    symbols: Mapping[str, int],
    outputs: Sequence[str] = ("out",),
) -> dict:
    """Run both SDFGs on the same inputs, assert identical outputs, return the transformed run."""
    ref = run(before, "before", arrays, symbols)
    got = run(after, "after", arrays, symbols)
    for o in outputs:
        np.testing.assert_allclose(got[o], ref[o], rtol=1e-14, atol=0)
    return got


def deep(sdfg: dace.SDFG) -> dace.SDFG:
    return copy.deepcopy(sdfg)
