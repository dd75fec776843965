"""The trace format's documentation and JSON Schema come from the schema the reader checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtrace.cli.main import main
from irtrace.trace.reader import load_trace
from irtrace.trace.schema_docs import BEGIN, END, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_trace_format_doc_holds_the_generated_tables() -> None:
    doc = (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8")
    block = doc[doc.index(BEGIN) : doc.index(END) + len(END)] + "\n"
    assert block == markdown(), "docs/trace-format.md is stale: paste `irtrace schema --format markdown`"


def test_every_line_of_a_written_trace_validates_against_the_json_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON Schema, checked by an independent validator (jsonschema), accepts what the writer
    writes and refuses what the reader refuses."""
    jsonschema = pytest.importorskip("jsonschema")
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    validator = jsonschema.Draft202012Validator(schema)
    trace = ROOT / "ci" / "examples.baseline.jsonl.gz"
    import gzip

    lines = gzip.decompress(trace.read_bytes()).decode("utf-8").splitlines()
    assert load_trace(trace).runs
    for line in lines[:2000]:
        record = json.loads(line)
        assert not list(validator.iter_errors(record)), record.get("record")
    bad = json.loads(next(line for line in lines if '"record":"pass"' in line))
    bad["index"] = "3"
    assert list(validator.iter_errors(bad))
