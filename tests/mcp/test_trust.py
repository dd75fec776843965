"""The trust rule and the server's survival, attacked through the MCP SDK's client over stdio.

Files outside the ``--root`` folders are refused before anything runs them (a marker file they
would create stays absent), however the path reaches outside (absolute, ``..``, a symbolic link).
A file that hangs, crashes or eats memory ends in a tool error and the next call works. Whatever
a kernel file prints, native writes to file descriptor 1 included, goes to stderr, not onto
the protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from ..conftest import DATA as TEST_DATA
from .conftest import DATA, McpServer, start_server

TIMEOUT_S = 6
MEMORY_MB = 1024

HOSTILE = """
from pathlib import Path

Path({marker!r}).write_text("the file ran")


def kernel():
    Path({marker!r}).write_text("the factory ran")
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An allowed root holding a link to a hostile file outside it, and that outside folder."""
    root = tmp_path_factory.mktemp("allowed")
    outside = tmp_path_factory.mktemp("outside")
    marker = outside / "marker.txt"
    (outside / "evil.py").write_text(HOSTILE.format(marker=str(marker)))
    (outside / "trace.jsonl").write_text("")
    (outside / "secret").write_text("TOP-SECRET-VALUE")
    (root / "linked.py").symlink_to(outside / "evil.py")
    return root, outside


@pytest.fixture(scope="module")
def guarded(folders: tuple[Path, Path], server_log: IO[str]) -> Iterator[McpServer]:
    root, _ = folders
    args = ["--root", str(DATA), "--root", str(root), "--root", str(TEST_DATA), "--timeout", str(TIMEOUT_S)]
    # tests/data/misbehaving.py's copy kernel then sleeps in native code inside tl.LowerTileOp
    misbehave = {"IRTRACE_TEST_MISBEHAVE": "hang:LowerTileOp"}
    yield from start_server([*args, "--memory-limit", str(MEMORY_MB)], server_log, misbehave)


def test_files_outside_the_roots_are_refused(guarded: McpServer, folders: tuple[Path, Path]) -> None:
    root, outside = folders
    evil = outside / "evil.py"
    relative = os.path.relpath(evil, DATA)  # relative paths start at the first root
    assert relative.startswith("..")
    for spec in (f"{evil}::kernel()", f"{relative}::kernel()", f"{root / 'linked.py'}::kernel()", str(evil)):
        for tool, extra in (("lower_kernel", {}), ("buffer_facts", {}), ("diagnostics", {})):
            message = guarded.error(tool, spec=spec, **extra)
            assert "outside the allowed roots" in message and str(evil) in message
        assert "outside the allowed roots" in guarded.error("get_ir", spec=spec, pass_name="tl.Simplify")
    trace = str(outside / "trace.jsonl")
    assert "outside the allowed roots" in guarded.error("check_trace", trace=trace, baseline=trace)
    assert not (outside / "marker.txt").exists()


def test_a_kernel_spec_from_an_agent_is_literals_only(guarded: McpServer, folders: tuple[Path, Path]) -> None:
    """Prompt injection reaches an agent's arguments: an expression is refused before anything
    is imported, so it neither runs a command nor reads a file outside the roots into an answer."""
    _, outside = folders
    marker = outside / "spec-marker"
    kernel = TEST_DATA / "fragment_scale.py"
    run_command = f"{kernel}::scale_rows(256 + 0*__import__('os').system('touch {marker}'))"
    read_secret = f"{kernel}::scale_rows(int(open({str(outside / 'secret')!r}).read()))"
    for spec in (run_command, read_secret):
        for tool, extra in (("lower_kernel", {}), ("buffer_facts", {}), ("diagnostics", {})):
            message = guarded.error(tool, spec=spec, **extra)
            assert "is not a literal" in message and "TOP-SECRET-VALUE" not in message, message
    assert not marker.exists()


def test_pass_configs_from_an_agent_reach_no_command_line_and_write_no_file(
    guarded: McpServer, folders: tuple[Path, Path]
) -> None:
    """nvcc runs its host compiler through a shell: compile flags from an agent are refused, as
    are options that make TileLang write files where they say; other configs are type-checked."""
    _, outside = folders
    marker = outside / "flags-marker"
    spec = f"{TEST_DATA / 'fragment_scale.py'}::scale_rows()"
    flags = {"tl.device_compile_flags": [f"-Xcompiler=-DX;touch${{IFS}}{marker};"]}
    for tool in ("lower_kernel", "machine_code"):
        message = guarded.error(tool, spec=spec, pass_configs=flags)
        assert "tl.device_compile_flags: reaches the device compiler's command line" in message, message
    dump = {"tl.enable_dump_ir": True, "tl.dump_ir_path": str(outside / "dumped")}
    assert "only makes TileLang write files" in guarded.error("lower_kernel", spec=spec, pass_configs=dump)
    wrong = {"tl.disable_warp_specialized": "$(touch x)"}
    assert "not a value of its type" in guarded.error("lower_kernel", spec=spec, pass_configs=wrong)
    assert not marker.exists() and not (outside / "dumped").exists()


def server_pid() -> int:
    """The ``python -m tilelang_mcp`` this test process started (not its worker)."""
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for child in (task / "children").read_text().split():
            words = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if words[1:3] == [b"-m", b"tilelang_mcp"]:
                return int(child)
    raise AssertionError("no tilelang_mcp server among this process's children")


def peak_memory_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def test_a_hostile_trace_is_loaded_outside_the_server(guarded: McpServer, folders: tuple[Path, Path]) -> None:
    """A 1 MB .gz decompression bomb under a root: read in a limited child, refused in one line;
    the server's own peak memory does not move."""
    root, _ = folders
    bomb = root / "bomb.jsonl.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    member = compressor.compress(b"a" * (1 << 20)) + compressor.flush()
    bomb.write_bytes(member * 1024)
    pid = server_pid()
    before = peak_memory_mb(pid)
    message = guarded.error("check_trace", trace=str(bomb), baseline=str(bomb))
    assert "decompression bomb" in message and "\n" not in message, message
    assert peak_memory_mb(pid) - before < 32, (before, peak_memory_mb(pid))


@pytest.mark.sweep  # 16-20 s on 2 cores: with the sweeps, to keep make test within 10 minutes
def test_a_hanging_file_times_out_and_the_server_goes_on(guarded: McpServer) -> None:
    began = time.monotonic()
    message = guarded.error("lower_kernel", spec="hang.py")
    took = time.monotonic() - began
    assert f"timed out after {TIMEOUT_S} s" in message and "before any lowering began" in message
    assert took < TIMEOUT_S + 20
    shorter = guarded.error("diagnostics", spec="hang.py", timeout_s=2)
    assert "timed out after 2 s" in shorter
    in_a_pass = guarded.ok("lower_kernel", spec=f"{TEST_DATA / 'misbehaving.py'}::copy()", timeout_s=4)
    (run,) = in_a_pass["runs"]
    assert (run["status"], run["stopped_by"], run["running"]) == ("failed", "timeout", "tl.LowerTileOp")
    assert "timed out after 4 s while pass tl.LowerTileOp was running" in run["error"]
    assert guarded.ok("lower_kernel", spec="noisy.py::scale()")["runs"][0]["status"] == "ok"


def test_a_crash_or_a_memory_hog_is_a_tool_error(guarded: McpServer) -> None:
    assert "SIGSEGV" in guarded.error("lower_kernel", spec="crash.py")
    message = guarded.error("lower_kernel", spec="hog.py")
    assert "MemoryError" in message and f"limit {MEMORY_MB} MB" in message
    assert guarded.ok("buffer_facts", spec="noisy.py::scale()")["kernels"][0]["reached"]


def test_stdout_carries_only_the_protocol(guarded: McpServer, server_log: IO[str]) -> None:
    answer = guarded.ok("lower_kernel", spec="noisy.py::scale()", targets=["cuda:sm_90", "hip:gfx942"])
    assert [run["status"] for run in answer["runs"]] == ["ok", "ok"]
    assert guarded.ok("diagnostics", spec="noisy.py::scale()")["kernels"]
    assert guarded.unparsed == []  # every line the client read was an MCP message
    server_log.flush()
    log = Path(server_log.name).read_text(encoding="utf-8")
    for noise in (
        "print to sys.stdout",
        "raw write to file descriptor 1",
        "TileLang's logger",
        "print while building",
    ):
        # it was written, and went to stderr: not to the worker's protocol pipe nor the client's
        assert f"NOISE: {noise}" in log


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(child) for child in (task / "children").read_text().split()}
    return found


def test_a_cancelled_job_stops_at_once_the_worker_stays_warm_and_one_that_dies_is_replaced(
    tmp_path: Path,
) -> None:
    """One worker (one start of TileLang, not two) for both claims. First, an agent cancels a job
    that would run for minutes (a file that never finishes loading): its child is gone within a
    second or two, nothing is left at the record's output, the worker is the same process (not
    killed after the client's grace and restarted cold) and answers the next job. Then the worker
    is killed mid-job (as the OOM killer would): the call fails, the job's child does not spin on,
    and the next call starts a new worker. The ids and children are read from /proc, not from the
    worker."""
    from irtrace.edge.worker_client import CANCEL_GRACE_S
    from tilelang_mcp.protocol import Facts, Record
    from tilelang_mcp.worker_client import WorkerClient, WorkerError

    output = tmp_path / "cancelled.jsonl"
    jobs = [
        Facts(spec=str(DATA / "hang.py"), target="cuda:sm_90", timeout_s=300, memory_mb=MEMORY_MB),
        Record(
            spec=str(DATA / "hang.py"),
            output=str(output),
            targets=("cuda:sm_90",),
            timeout_s=300,
            memory_mb=MEMORY_MB,
        ),
    ]
    noisy = Facts(
        spec=f"{DATA / 'noisy.py'}::scale()", target="cuda:sm_90", timeout_s=120, memory_mb=MEMORY_MB
    )

    async def scenario() -> None:
        client = WorkerClient(scratch=tmp_path)
        worker = None
        for job in jobs:
            call = asyncio.create_task(client.job(job))
            while client.process is None or not client.ready_info or not _children(client.process.pid):
                await asyncio.sleep(0.2)  # started, warm, and its child is running the file
            worker = worker or client.process.pid
            assert client.process.pid == worker
            (child,) = _children(worker)
            began = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            took = time.monotonic() - began
            assert took < CANCEL_GRACE_S / 2, f"the cancel took {took:.1f} s"
            assert child not in _children(worker) and not Path(f"/proc/{child}").exists()
            assert client.restarts == 0 and client.process.pid == worker
        assert not output.exists()
        answer = await client.job(noisy)
        assert answer["kernels"][0]["reached"]
        assert client.restarts == 0 and client.process is not None and client.process.pid == worker

        # the worker dies mid-job
        hang = Facts(spec=str(DATA / "hang.py"), target="cuda:sm_90", timeout_s=120, memory_mb=MEMORY_MB)
        call = asyncio.create_task(client.job(hang))
        while client.process is None or not client.ready_info or not _children(client.process.pid):
            await asyncio.sleep(0.2)  # its child is running the file
        (job,) = _children(client.process.pid)
        client.process.kill()
        with pytest.raises(WorkerError, match="exited"):
            await call
        for _ in range(100):
            if not Path(f"/proc/{job}").exists() or "Z" in Path(f"/proc/{job}/stat").read_text().split()[2]:
                break
            await asyncio.sleep(0.1)
        else:
            os.kill(job, signal.SIGKILL)  # not left spinning after a failed test
            raise AssertionError("the job's child outlived its worker")
        answer = await client.job(noisy)
        assert answer["kernels"][0]["reached"] and client.restarts == 1
        assert client.process is not None and client.process.pid != worker
        await client.stop()

    asyncio.run(scenario())


def _mcp_worker(server: int) -> int:
    """The pid of ``server``'s TileLang worker (its child running ``tilelang_mcp.worker``)."""
    for child in _children(server):
        if b"tilelang_mcp.worker" in Path(f"/proc/{child}/cmdline").read_bytes():
            return child
    raise AssertionError("the server has no worker")


def test_an_agent_that_cancels_a_call_gets_the_next_from_the_same_warm_worker(guarded: McpServer) -> None:
    """The user's path: an agent cancels a tools/call (MCP's notifications/cancelled) on a file
    that never finishes loading; the job's child is gone at once and the next call is answered by
    the same worker process (read from /proc), not a restarted one."""
    import mcp.types as types
    from mcp.shared.exceptions import McpError

    session = guarded.session
    assert session is not None
    (server,) = (
        pid for pid in _children(os.getpid()) if b"tilelang_mcp" in Path(f"/proc/{pid}/cmdline").read_bytes()
    )

    async def scenario() -> None:
        request_id = session._request_id  # the id the SDK gives the next request
        call = asyncio.create_task(session.call_tool("lower_kernel", {"spec": "hang.py", "timeout_s": 300}))
        worker = _mcp_worker(server)
        while not _children(worker):
            await asyncio.sleep(0.2)  # the job's child is running the file
        (child,) = _children(worker)
        began = time.monotonic()
        cancel = types.CancelledNotification(
            params=types.CancelledNotificationParams(requestId=request_id, reason="the agent moved on")
        )
        await session.send_notification(types.ClientNotification(cancel))
        with pytest.raises(McpError, match="cancelled"):
            await call
        while Path(f"/proc/{child}").exists() and time.monotonic() - began < 30:
            await asyncio.sleep(0.1)
        assert time.monotonic() - began < 2.5, "the job's child outlived the cancel"
        answer = await session.call_tool("lower_kernel", {"spec": "noisy.py::scale()"})
        assert not answer.isError and answer.structuredContent is not None
        assert answer.structuredContent["runs"][0]["status"] == "ok"
        assert _mcp_worker(server) == worker

    guarded.run(scenario())


def test_the_cancel_watch_keeps_what_is_not_its_jobs_cancel() -> None:
    """Lines that come while a job runs and are not its ``Cancel`` (another id, a half line) are
    left, whole and in order, for the worker's main loop; a last line without its newline too."""
    from irtrace.edge.worker_runtime import CancelWatch, StdinLines
    from tilelang_mcp.protocol import CODEC

    read, write = os.pipe()
    try:
        stdin = StdinLines(read)
        watch = CancelWatch(stdin, CODEC, call_id=7, on_closed=lambda: None)
        other = b'{"kind": "cancel", "id": 6}'
        call = b'{"kind": "call", "id": 8, "request": {"method": "facts"}}'
        os.write(write, other + b"\n" + call[:20])
        watch._on_timer(signal.SIGALRM, None)
        os.write(write, call[20:] + b"\n")
        with watch.interruptible():
            watch._on_timer(signal.SIGALRM, None)  # armed, but no cancel of its own: nothing raised
        assert not watch.cancelled
        os.write(write, b'{"kind": "cancel", "id": 7}\n')
        with pytest.raises(KeyboardInterrupt), watch.interruptible():
            watch._on_timer(signal.SIGALRM, None)
        assert watch.cancelled
        last = b'{"kind": "cancel", "id": 9}'
        os.write(write, last)  # the input ends without the line's newline
        os.close(write)
        write = -1
        assert list(stdin) == [other, call, last]
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_the_worker_refuses_a_job_outside_its_schema_naming_the_field() -> None:
    """What reaches the worker is typed: an unknown field (an option smuggled in), a value of the
    wrong type or range, an unknown job or a missing field is refused, naming it, before anything
    runs; a line without a readable id gets no answer."""
    from irtrace.edge.worker_protocol import Failure, decode_from_worker, encode
    from irtrace.edge.worker_runtime import StdinLines
    from tilelang_mcp.protocol import Facts, InvalidJob, make_job
    from tilelang_mcp.worker import RUNTIME

    def answer(line: bytes) -> bytes | None:
        reply = RUNTIME.reply(line, StdinLines(), lambda event: None, -1)
        return None if reply is None else encode(reply)

    job = {"method": "facts", "spec": f"{DATA / 'noisy.py'}::scale()", "timeout_s": 5, "memory_mb": 64}
    refused = {
        "Object contains unknown field `evil` - at `$.request`": {**job, "evil": "--exec"},
        "Expected `float` > 0.0 - at `$.request.timeout_s`": {**job, "timeout_s": -1},
        "Expected `int` >= 1 - at `$.request.line`": {**job, "line": 0},
        "Expected `str | null`, got `array` - at `$.request.target`": {**job, "target": ["all"]},
        "Invalid value 'shell' - at `$.request.method`": {**job, "method": "shell"},
        "Object missing required field `output` - at `$.request`": {**job, "method": "record"},
    }
    for number, (reason, request) in enumerate(refused.items(), 1):
        reply = answer(json.dumps({"kind": "call", "id": number, "request": request}).encode())
        assert reply is not None
        message = decode_from_worker(reply)
        assert isinstance(message, Failure) and message.id == number
        assert message.error == f"malformed request: {reason}"
    assert answer(b"rm -rf /") is None
    # the server makes each job through the same schema: an agent's bad value never reaches the worker
    with pytest.raises(
        InvalidJob, match=r"^invalid facts request: Expected `float` > 0.0 - at `\$.timeout_s`$"
    ):
        make_job(Facts, spec="k.py", timeout_s=0, memory_mb=64)


def test_an_agents_arguments_are_decoded_through_the_tools_struct() -> None:
    """Arguments are data checked against the tool's ``Arguments`` struct before anything runs:
    a wrong type or range is refused naming the argument, a list sent as JSON text is read as a
    list (clients do this) but text a tool takes stays text, an unknown argument is ignored, and a
    JSON bomb in text is a tool error, not a crash."""
    from tilelang_mcp.server import RegisteredTool
    from tilelang_mcp.session import ToolError
    from tilelang_mcp.tools import diff_lowerings, lower_kernel, source_line_ir

    lower = RegisteredTool.of(lower_kernel)
    decoded = lower.decode_arguments({"spec": "[1]", "targets": '["cuda:sm_90"]', "evil": "--exec"})
    assert (decoded.spec, decoded.targets) == ("[1]", ["cuda:sm_90"])
    assert not hasattr(decoded, "evil")
    refused = {
        "Expected `array | null`, got `str` - at `$.targets`": {"spec": "k.py", "targets": "cuda"},
        "Expected `float` > 0.0 - at `$.timeout_s`": {"spec": "k.py", "timeout_s": 0},
        "Object missing required field `spec`": {"targets": ["all"]},
        "Expected `object | null`, got `array` - at `$.pass_configs`": {
            "spec": "k.py",
            "pass_configs": "[1]",
        },
    }
    for reason, arguments in refused.items():
        with pytest.raises(ToolError, match=r"^invalid arguments: ") as error:
            lower.decode_arguments(arguments)
        assert reason in str(error.value)
    with pytest.raises(ToolError, match=r"`int` >= 1 - at `\$.line`"):
        RegisteredTool.of(source_line_ir).decode_arguments({"line": 0, "spec": "k.py"})
    with pytest.raises(ToolError, match=r"`int` <= 50 - at `\$.context`"):
        RegisteredTool.of(diff_lowerings).decode_arguments({"spec": "k.py", "context": 51})
    bomb = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ToolError, match=r"got `str` - at `\$.targets`"):
        lower.decode_arguments({"spec": "k.py", "targets": bomb})
