"""GTIR-carried annotations: recorded at lowering, kept through JSON, read back."""

import json

import dace
import fixture_lib
import numpy as np
import test_concat_gt4py as programs
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.analysis import annotations
from gt4py_dace_xforms.integration.lowering import KEY, record_annotations


def _lower(program, args):
    with record_annotations():
        return fixture_lib.lower_and_capture(
            program, args, {}, GT4PyAutoOptHook.TopLevelDataFlowStep
        )


def test_concat_and_field_annotations_survive_json_round_trip():
    a = programs.field()
    sdfg = _lower(programs.runtime_boundary_program, [a, a, a, np.int32(9), np.int32(0)])
    concat = [
        n for n, d in sdfg.arrays.items() if (annotations.read(d) or {}).get("kind") == "concat"
    ]
    fields = {
        n for n, d in sdfg.arrays.items() if (annotations.read(d) or {}).get("kind") == "field"
    }
    assert concat and {"a", "b"} <= fields
    ann = annotations.read(sdfg.arrays[concat[0]])
    assert ann["dim"] == 1 and len(ann["branches"]) == 2
    again = dace.SDFG.from_json(json.loads(json.dumps(sdfg.to_json())))
    assert again.arrays[concat[0]].location[KEY] == sdfg.arrays[concat[0]].location[KEY]
    assert annotations.concat_annotation(again, concat[0]) == ann
    assert annotations.field_facts(again, ["a"])  # facts about the extent of `a`


def test_no_recording_outside_the_context():
    a = programs.field()
    sdfg = fixture_lib.lower_and_capture(
        programs.runtime_boundary_program,
        [a, a, a, np.int32(9), np.int32(0)],
        {},
        GT4PyAutoOptHook.TopLevelDataFlowStep,
    )
    assert not any(KEY in d.location for d in sdfg.arrays.values())


def test_annotation_for_another_shape_is_ignored():
    a = programs.field()
    sdfg = _lower(programs.runtime_boundary_program, [a, a, a, np.int32(9), np.int32(0)])
    name = next(
        n for n, d in sdfg.arrays.items() if (annotations.read(d) or {}).get("kind") == "concat"
    )
    sdfg.arrays[name].shape = (sdfg.arrays[name].shape[0], 3)  # as if a pass had re-based it
    assert annotations.concat_annotation(sdfg, name) is None
