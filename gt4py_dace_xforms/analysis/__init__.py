"""Pure analysis: index/offset resolution, producer slices, coverage. Never mutates."""

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, ReadGroup, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline, ProducerSlice, analyse_producer


__all__ = [
    "Decline",
    "InlineCandidate",
    "ProducerSlice",
    "ReadGroup",
    "analyse_candidate",
    "analyse_producer",
]
