"""The result contract: versioned, typed on the way in, and described by the JSON Schema shipped
with the package (lab/measure/result.schema.json), which `--json` output must satisfy."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from lab.measure import result_schema
from lab.measure.result import READS, SCHEMA, CodePaths, DeviceInfo, RunResult, Timing
from lab.measure.schema import SchemaError
from lab.course.reference import REFERENCE_DIR
from lab.runner.protocol import decode_event

RECORDINGS = sorted(REFERENCE_DIR.glob("*/*.json"))


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(result_schema.PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_json_schema_is_what_the_code_says():
    assert result_schema.PATH.read_text(encoding="utf-8") == result_schema.text(), \
        "regenerate it: python -m lab.measure.result_schema"


def test_the_schema_declares_the_fields_later_issues_need(validator):
    props = validator.schema["$defs"]["RunResult"]["properties"]
    for name in ("schema", "versions", "code_paths", "compile_mode", "timing", "torch_version",
                 "transformers_version", "simulated"):
        assert name in props, name
    assert props["schema"] == {"const": SCHEMA}


def test_there_are_recordings():
    assert RECORDINGS


# one test per recording (together ~27 s of one core: the full suite's, not the quick tier's)
@pytest.mark.slow
@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recording_reads_and_its_json_form_fits_the_schema(validator, path):
    # Given an H200 recording (schema 1 or 2), when read and written back as --json writes it,
    # then it validates against the schema of today
    r = RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    errors = sorted(validator.iter_errors(json.loads(json.dumps(r.to_dict()))), key=str)
    assert not errors, f"{path.name}: {errors[0].message} at {list(errors[0].path)}"


def test_a_result_with_the_new_fields_round_trips_and_fits(validator):
    r = RunResult("l", "v", "cuda", "seed", DeviceInfo("NVIDIA H200", "cuda", 10, None),
                  timing=Timing([0.1, 0.12, 0.11, 0.13, 0.1], 1, "m"),
                  versions={"python": "3.11.7", "torch": "2.11.0"},
                  code_paths=CodePaths(["cudnn"], "foreach"), compile_mode="compiled")
    d = json.loads(json.dumps(r.to_dict()))
    assert not list(validator.iter_errors(d))
    back = RunResult.from_dict(d)
    assert back == r and back.timing.spread_s == pytest.approx(0.03)


@pytest.mark.parametrize("change, says", [
    (lambda d: d["peak"].update(bytes="12"), "result.peak.bytes: expected an integer, got '12'"),
    (lambda d: d["phases"][0].update(name=3), "result.phases[0].name: expected a string"),
    (lambda d: d.pop("variant"), "result.variant: missing"),
    (lambda d: d["timeline"]["live"].__setitem__(1, None), "result.timeline.live[1]"),
    (lambda d: d.update(step_time_s=float("inf")), "is not a finite number"),
    (lambda d: d.update(schema=99), "result schema 99 is not supported"),
])
def test_a_wrong_field_is_one_line_naming_it(change, says):
    d = json.loads(RECORDINGS[0].read_text(encoding="utf-8"))
    change(d)
    with pytest.raises(SchemaError) as e:
        RunResult.from_dict(d)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_both_schemas_are_read_and_written_back_as_today():
    assert set(READS) == {1, SCHEMA}
    # a schema-1 recording (the shipped ones were recorded again in schema 2)
    old = Path(__file__).parents[1] / "fixtures" / "reference" / "linear-baseline" / "no_grad.json"
    d = json.loads(old.read_text(encoding="utf-8"))
    assert d["schema"] == 1
    assert RunResult.from_dict(d).to_dict()["schema"] == SCHEMA


def test_code_paths_name_what_differs():
    a, b = CodePaths(["cudnn"], "foreach"), CodePaths(["math"], "foreach")
    assert a.differs(b) == ["attention cudnn vs math"]
    assert a.differs(CodePaths([], "")) == [] and a.differs(None) == []


@pytest.mark.parametrize("event, ok", [
    ({"type": "phase", "name": "forward 0", "live_bytes": 12}, True),
    ({"type": "sample", "t": 0.1, "live_bytes": 1, "phase": "", "events": 3, "rank": 1}, True),
    ({"type": "phase", "name": "forward 0", "live_bytes": "12"}, False),
    ({"type": "started", "pid": 1, "lesson": "x", "variant": "v", "mode": "sim"}, False),
    ({"type": "nonsense"}, False),
    ([1, 2], False),
])
def test_wire_events_are_decoded_by_their_type(event, ok):
    if ok:
        assert decode_event(event) is event
    else:
        with pytest.raises(SchemaError):
            decode_event(event)


def test_a_malformed_event_line_is_kept_as_junk_not_passed_on():
    from lab.runner.protocol import RunRequest
    from lab.runner.stream import WorkerStream

    s = WorkerStream(RunRequest("linear-baseline", "baseline"))
    assert s.feed_line('{"type": "phase", "name": 1, "live_bytes": 2}') is None
    assert s.junk and "phase event.name" in s.junk[0]
    assert s.feed_line('{"type": "phase", "name": "model", "live_bytes": 2}') is not None
