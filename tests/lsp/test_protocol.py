"""The server-worker protocol is typed on both sides: a message that does not follow it fails the one
request it names with the field that is wrong, and neither process stops reading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang_lsp.protocol import (
    AnalysisResult,
    Analyze,
    Call,
    Cancel,
    Failure,
    KernelAnalysis,
    ProtocolError,
    Result,
    decode_body,
    decode_from_worker,
    decode_to_worker,
    encode,
    message_id,
    raw,
)
from tilelang_lsp.worker_client import RequestFailed, WorkerClient

ROOT = Path(__file__).resolve().parents[2]


def test_messages_round_trip_and_bad_ones_name_the_field() -> None:
    call = Call(id=7, request=Analyze(path="/k.py", text="import tilelang\n", full=True))
    assert decode_to_worker(encode(call)) == call
    assert decode_to_worker(encode(Cancel(id=7))) == Cancel(id=7)
    kernel = KernelAnalysis(
        name="matmul", kind="factory", line=3, target="cuda:sm_90", target_origin="default target",
        call="matmul(64)", args_origin="call at line 9", args={"M": "64"},
    )  # fmt: skip
    answer = decode_from_worker(encode(Result(id=7, body=raw(AnalysisResult(kernels=(kernel,))), rss_mb=1.0)))
    assert isinstance(answer, Result)
    assert decode_body(answer.body, Analyze.answer, "analyze") == AnalysisResult(kernels=(kernel,))
    bad = b'{"kind": "call", "id": 5, "request": {"method": "analyze", "path": 3, "text": ""}}'
    with pytest.raises(
        ProtocolError, match=r"^malformed request: Expected `str`, got `int` - at `\$.request.path`$"
    ):
        decode_to_worker(bad)
    assert message_id(bad) == 5
    with pytest.raises(ProtocolError, match=r"unknown field `evil`"):
        decode_to_worker(b'{"kind": "cancel", "id": 1, "evil": "rm -rf"}')
    with pytest.raises(ProtocolError, match=r"^malformed worker message: JSON is malformed"):
        decode_from_worker(b"Traceback (most recent call last):")
    assert message_id(b"Traceback (most recent call last):") is None
    with pytest.raises(
        ProtocolError, match=r"^malformed answer to analyze: Expected `array`, got `str` - at `\$.kernels`$"
    ):
        decode_body(b'{"kernels": "all of them"}', AnalysisResult, "analyze")


FAKE_WORKER = """
import json, sys
def send(line):
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
send(json.dumps({"kind": "ready", "pid": 1, "import_s": 0.1, "prefix": sys.prefix, "tilelang": "/nowhere"}))
for line in sys.stdin:
    call = json.loads(line)
    number = call["id"]
    if number == 1:  # a well-formed message whose body is not an AnalysisResult
        send(json.dumps({"kind": "result", "id": 1, "body": {"kernels": [{"name": 3}]}, "rss_mb": 1}))
    elif number == 2:  # a message with an id that is not a protocol message
        send(json.dumps({"kind": "result", "id": 2, "body": {}, "rss_mb": "lots"}))
    else:  # noise, then a good answer: the reader carries on
        send("tilelang says hello on the wrong stream")
        send(json.dumps({"kind": "result", "id": number, "body": {"dialect": "tilelang"}, "rss_mb": 1}))
"""


async def test_the_client_fails_a_malformed_answer_and_carries_on(tmp_path: Path) -> None:
    """A worker that breaks the protocol (another version of tilelang-lsp in the ``python``
    environment, a print on stdout): each request it garbles fails with the field named, the
    request after it is answered, and the worker is not restarted."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    interpreter = tmp_path / "python"
    interpreter.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    interpreter.chmod(0o755)
    client = WorkerClient(str(interpreter))
    request = Analyze(path=str(tmp_path / "k.py"), text="import tilelang\n")
    try:
        with pytest.raises(RequestFailed) as first:
            await client.request(request, timeout=30)
        assert str(first.value) == (
            "malformed answer to analyze: Expected `str`, got `int` - at `$.kernels[0].name`"
        )
        with pytest.raises(RequestFailed) as second:
            await client.request(request, timeout=30)
        assert str(second.value) == "malformed worker message: Expected `float`, got `str` - at `$.rss_mb`"
        third = await client.request(request, timeout=30)
        assert third == AnalysisResult(dialect="tilelang")
        assert client.restarts == 0 and client.pid is not None
    finally:
        await client.stop()


def test_the_worker_answers_a_malformed_request_with_the_reason() -> None:
    """The real worker: a request with a wrong field gets a ``Failure`` naming it, and the next
    request is served."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "tilelang_lsp.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        bad = {"kind": "call", "id": 5, "request": {"method": "analyze", "path": 3, "text": ""}}
        good = encode(Call(id=6, request=Analyze(path="/tmp/plain.py", text="x = 1\n")))
        worker.stdin.write(json.dumps(bad).encode() + b"\n" + good)
        worker.stdin.flush()
        answers = {}
        while len(answers) < 2:
            message = decode_from_worker(worker.stdout.readline())
            if isinstance(message, (Result, Failure)):
                answers[message.id] = message
        assert answers[5] == Failure(
            id=5, error="malformed request: Expected `str`, got `int` - at `$.request.path`"
        )
        result = answers[6]
        assert isinstance(result, Result)
        skipped = decode_body(result.body, AnalysisResult, "analyze")
        assert skipped.skipped == "the file does not import tilelang, so it is not executed"
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
