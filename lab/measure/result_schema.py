"""The JSON Schema of `memlab … --json` (a RunResult, or a list of them), generated from the
dataclasses in lab.measure.result, shipped as lab/measure/result.schema.json.

    python -m lab.measure.result_schema          # rewrites the file (after a schema change)
    python -m lab.measure.result_schema --check  # exit 1 when the file is not what the code says
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .result import SCHEMA, RunResult
from .schema import json_schema

PATH = Path(__file__).with_name("result.schema.json")
SCHEMA_ID = f"https://memlab.dev/schema/result-{SCHEMA}.json"


def result_schema() -> dict:
    schema = json_schema(RunResult, f"memlab RunResult, schema {SCHEMA}", SCHEMA_ID,
                         extra_properties={"simulated": {"type": "boolean"}})
    defs = schema["$defs"]["RunResult"]
    defs["properties"]["schema"] = {"const": SCHEMA}
    defs["required"] = sorted(set(defs.get("required", [])) | {"schema"})
    return schema


def text() -> str:
    return json.dumps(result_schema(), indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        same = PATH.is_file() and PATH.read_text(encoding="utf-8") == text()
        print("result.schema.json is up to date" if same else
              "result.schema.json differs from the code: python -m lab.measure.result_schema")
        return 0 if same else 1
    PATH.write_text(text(), encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
