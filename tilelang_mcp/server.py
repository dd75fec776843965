"""The MCP server: tools that answer from TileLang's real pipelines, for coding agents.

One ``TileLangMcp`` object holds the allowed roots, the limits, the worker and the traces this
session recorded; its tools are registered on a FastMCP server. Tools that lower kernels send a
job to the worker (``tilelang_mcp.worker``), which forks a child per job; tools that read traces
work here, on files. This process never imports tilelang, and its stdout carries protocol
messages only (``serve``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.resources import FunctionResource
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from irtrace import __version__
from irtrace.core.instances import instance_trace_files
from irtrace.core.targets import DEFAULT_TARGET
from tilelang_mcp import backend, line_tool
from tilelang_mcp.protocol import Diagnostics, Facts, InvalidJob, Job, Record, Recorded, make_job
from tilelang_mcp.roots import AllowedRoots, RootError
from tilelang_mcp.worker_client import RequestCancelled, RequestFailed, WorkerClient, WorkerError

DEFAULT_LINES = 200
"""Lines of IR or diff a call returns unless it asks for another ``limit``."""
MAX_LINES = 2000
MAX_TEXT_CHARS = 60_000
"""Longest IR, source or diff text one call returns; past it the text is cut at a line."""
MAX_STRING_CHARS = 4000
"""Longest string in a JSON answer (an error message); page-able texts are bounded by pages."""
FAILURE_IR_LINES = 60
"""Lines of a failing pass's input shown in ``lower_kernel``'s answer."""
MAX_PASS_ROWS = 400
"""Pass rows ``lower_kernel`` lists in all; past it the rows are cut, with a note."""

INSTRUCTIONS = """\
TileLang's real compiler, for checking kernels you write. A kernel spec is `path.py::factory(args)`
(e.g. `kernels/gemm.py::matmul(1024, 1024, 1024, block_M=128)`), `path.py::jit_kernel(N=4096)`
or `path.py` for its module-level PrimFuncs; paths are relative to the first allowed root.
Targets: `cuda:sm_90a`, `hip:gfx942`, `metal`, `ascend`, ... (`list_targets`; `all` for every one).
Start with `lower_kernel`: it returns a trace id (`t1`) that `get_ir`, `diff_passes` and
`check_trace` accept instead of lowering again. Long texts come in pages: pass `offset` to read on.
Only files under the folders the user allowed run, each in a child process with a time limit."""

Spec = Annotated[
    str,
    Field(
        description="Kernel spec: path.py::factory(args), path.py::jit_kernel(kw=...), or path.py for its "
        "module-level PrimFuncs; path.py::name alone takes the arguments the project's irtrace.toml "
        "records. Relative paths start at the first allowed root.",
        max_length=backend.MAX_SPEC_CHARS,
    ),
]
OptionalSpec = Annotated[
    str | None,
    Field(
        description="Kernel spec to lower first (instead of `trace`): path.py::factory(args).",
        max_length=backend.MAX_SPEC_CHARS,
    ),
]
TraceRef = Annotated[
    str | None,
    Field(
        description="A trace this session recorded (`t1`, from lower_kernel) or a trace file under the roots."
    ),
]
Target = Annotated[
    str | None,
    Field(
        description=f"Target, e.g. {DEFAULT_TARGET}, hip:gfx942, metal, ascend "
        f"(default: {DEFAULT_TARGET}, ascend for tilelang.ascend kernels)."
    ),
]
Targets = Annotated[
    list[str] | None,
    Field(
        description=f"Targets to lower for (default: {DEFAULT_TARGET}, or ascend); `all` for every target."
    ),
]
Configs = Annotated[
    dict[str, Any] | None,
    Field(
        description='Pass configs on top of the kernel\'s own, e.g. {"tl.disable_warp_specialized": true}.'
    ),
]
Kernel = Annotated[str | None, Field(description="Kernel name, when the trace or spec holds several.")]
Timeout = Annotated[
    float | None, Field(description="Seconds this call may take (at most the server's --timeout).", gt=0)
]
Offset = Annotated[
    int, Field(description="First line to return (0-based), to page through long texts.", ge=0)
]
Limit = Annotated[int, Field(description=f"Lines to return (at most {MAX_LINES}).", ge=1, le=MAX_LINES)]
Normalize = Annotated[
    bool, Field(description="Mask target JSON, object addresses and metadata indices before comparing.")
]


@dataclass(frozen=True)
class ServerConfig:
    """What the command line decides: where files may come from and what each job may use."""

    roots: AllowedRoots
    timeout_s: float = 120.0
    """Most seconds a tool call that lowers kernels may take."""
    memory_mb: int = 8192
    """Memory a job may map on top of the worker's own."""
    store: Path = field(default_factory=lambda: Path("."))
    """Folder for the traces this session records (the caller makes it and removes it)."""


@dataclass(frozen=True)
class StoredTrace:
    """A trace this session recorded."""

    trace_id: str
    path: Path
    what: str
    """What was lowered: ``spec on targets``."""


P = ParamSpec("P")


def tool_errors(
    function: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Awaitable[CallToolResult]]:
    """Errors a call can cause become a tool error with their one-line message, never a crash."""

    @functools.wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await function(*args, **kwargs)
        except ToolError as error:  # messages are cut as every string of an answer is
            if len(str(error)) <= MAX_STRING_CHARS:
                raise
            raise ToolError(clip(str(error))) from None
        except (
            backend.IrtraceError,
            backend.JobError,
            InvalidJob,
            RootError,
            WorkerError,
            RequestFailed,
            RequestCancelled,
        ) as error:
            raise ToolError(clip(backend.describe_job_error(error))) from None

    return wrapper


def clip(value: Any) -> Any:
    """``value`` with every string longer than ``MAX_STRING_CHARS`` cut, saying how much was cut:
    compiler errors can quote whole modules."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return value[:MAX_STRING_CHARS] + f"... [{len(value) - MAX_STRING_CHARS} more characters cut]"
    if isinstance(value, dict):
        return {key: clip(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clip(item) for item in value]
    return value


def result(summary: str, data: dict[str, Any], body: str | None = None) -> CallToolResult:
    """A short text for the reader, then the body (the JSON, or the IR or diff text itself)."""
    if body is None:  # paged texts are bounded by their pages; the rest by its strings
        data = clip(data)
    text = body if body is not None else backend.dump(data)
    return CallToolResult(
        content=[TextContent(type="text", text=summary), TextContent(type="text", text=text)],
        structuredContent=data,
    )


def page(
    text: str, offset: int, limit: int, how_to_continue: str, max_chars: int = MAX_TEXT_CHARS
) -> tuple[str, dict[str, Any]]:
    """Lines ``offset`` to ``offset + limit`` of ``text`` (cut sooner at ``MAX_TEXT_CHARS``), and a
    note saying which lines these are and how to get the rest."""
    lines = text.splitlines(keepends=True)
    total = len(lines)
    chunk: list[str] = []
    size = 0
    for line in lines[offset : offset + min(limit, MAX_LINES)]:
        if chunk and size + len(line) > max_chars:
            break
        chunk.append(line[:max_chars])
        size += len(chunk[-1])
    end = offset + len(chunk)
    info: dict[str, Any] = {"offset": offset, "lines": len(chunk), "total_lines": total, "complete": False}
    if offset == 0 and end >= total:
        info["complete"] = True
    elif offset >= total:
        info["note"] = f"offset {offset} is past the end: the text has {total} lines"
    elif end < total:
        info["note"] = (
            f"showing lines {offset + 1}-{end} of {total}; {how_to_continue} with offset={end} for the rest"
        )
    else:
        info["note"] = f"showing lines {offset + 1}-{end} of {total} (the end)"
    return "".join(chunk), info


class TileLangMcp:
    """The server's state and its tools."""

    def __init__(self, config: ServerConfig, worker: WorkerClient | None = None) -> None:
        self.config = config
        if worker is None:
            scratch = config.store / "scratch"
            scratch.mkdir(parents=True, exist_ok=True)
            worker = WorkerClient(scratch=scratch)
        self.worker = worker
        self.traces: dict[str, StoredTrace] = {}
        self.recorded = 0
        self.server = FastMCP("tilelang", instructions=INSTRUCTIONS, log_level="WARNING")
        # FastMCP takes no version and answers `initialize` with the MCP SDK's own: say ours.
        self.server._mcp_server.version = __version__
        for tool in (
            self.list_targets,
            self.lower_kernel,
            self.get_ir,
            self.diff_passes,
            self.diff_lowerings,
            self.buffer_facts,
            self.diagnostics,
            self.machine_code,
            self.coverage_matrix,
            self.check_trace,
            self.source_line_ir,
        ):
            self.server.add_tool(tool)

    # --- helpers ------------------------------------------------------------------------------

    def kernel_spec(self, text: str) -> str:
        """The spec with its file checked against the roots and made absolute. A kernel named
        without arguments gets its instance in the job, from the resolver the language server uses
        (docs/lsp.md, "Which kernel, which arguments, which target")."""
        spec = backend.parse_kernel_spec(text)
        file = self.config.roots.check(spec.path, "kernel file")
        return backend.with_path(spec, file)

    def timeout(self, asked: float | None) -> float:
        return min(asked, self.config.timeout_s) if asked else self.config.timeout_s

    async def job(self, kind: type[Job], spec: str, timeout_s: float | None, **fields: Any) -> Any:
        """Run a job of ``kind`` for the spec ``spec`` in the worker: its file checked against the
        roots, the instance sources of its root, this call's limits, and ``fields``, all through
        the job's schema (an unknown field or a bad value is a tool error naming it)."""
        checked = self.kernel_spec(spec)
        # a kernel named without arguments may take an instance recorded under its root
        # (``irtrace.jsonl``, ``.irtrace/*.jsonl``); no manifest above that root is read
        root = self.config.roots.root_of(Path(backend.parse_kernel_spec(checked).path))
        request = make_job(
            kind,
            spec=checked,
            timeout_s=self.timeout(timeout_s),
            memory_mb=self.config.memory_mb,
            instance_traces=list(instance_trace_files(root)),
            manifest_root=str(root),
            **fields,
        )
        return await self.worker.job(request)

    async def record(
        self,
        spec: str,
        targets: list[str],
        pass_configs: dict[str, Any] | None,
        timeout_s: float | None,
        *,
        machine_code: bool = False,
        bench: bool = False,
        source_map: bool = False,
    ) -> tuple[str, backend.Trace, Recorded]:
        """Lower ``spec`` for ``targets`` in the worker into a new session trace; its id, the
        trace and what the job said (why it stopped early, each run's instance)."""
        names = backend.canonical_targets(targets)
        self.recorded += 1  # before any await: concurrent calls get ids of their own
        trace_id = f"t{self.recorded}"
        path = self.config.store / f"{trace_id}.jsonl"
        answer: Recorded = await self.job(
            Record,
            spec,
            timeout_s,
            targets=names,
            pass_configs=pass_configs or {},
            output=str(path),
            machine_code=machine_code,
            bench=bench,
            source_map=source_map,
        )
        trace = await self.load_file(path)
        stored = StoredTrace(trace_id, path, f"{spec} on {', '.join(names)}")
        self.traces[trace_id] = stored
        self.publish(stored, trace)
        await self.notify_resources()
        return trace_id, trace, answer

    async def load_file(self, path: Path) -> backend.Trace:
        """A trace file read by a child process under the job limits (``load_trace_bounded``)."""
        limits = backend.JobLimits(self.config.timeout_s, self.config.memory_mb)
        return await anyio.to_thread.run_sync(backend.load_trace_bounded, path, limits, self.config.store)

    def publish(self, stored: StoredTrace, trace: backend.Trace) -> None:
        """The trace as a resource, ``trace://t1``: its runs in brief and its file."""
        data = {
            "trace": stored.trace_id,
            "what": stored.what,
            "file": str(stored.path),
            "runs": [backend.run_summary(trace, run) for run in trace.runs],
        }
        self.server.add_resource(
            FunctionResource(
                uri=f"trace://{stored.trace_id}",  # type: ignore[arg-type]
                name=stored.trace_id,
                description=f"Trace recorded by tilelang-mcp: {stored.what}",
                mime_type="application/json",
                fn=lambda: backend.dump(data),
            )
        )

    async def notify_resources(self) -> None:
        with contextlib.suppress(Exception):  # outside a request, or a client that does not listen
            await self.server.get_context().session.send_resource_list_changed()

    async def load(self, reference: str) -> tuple[str, backend.Trace]:
        """A session trace by id, or a trace file under the roots."""
        return reference, await self.load_file(self.trace_path(reference))

    def trace_path(self, reference: str) -> Path:
        """The file of a session trace (by id) or of a trace file under the roots."""
        stored = self.traces.get(reference)
        if stored is None and re.fullmatch(r"t\d+", reference):
            recorded = ", ".join(self.traces) or "none yet"
            raise ToolError(f"no trace {reference!r} was recorded in this session (recorded: {recorded})")
        return stored.path if stored is not None else self.config.roots.check(reference, "trace file")

    async def trace_or_spec(
        self, trace: str | None, spec: str | None, target: str | None, timeout_s: float | None
    ) -> tuple[str, backend.Trace]:
        if (trace is None) == (spec is None):
            raise ToolError("give either `trace` (a recorded trace) or `spec` (a kernel to lower), not both")
        if trace is not None:
            return await self.load(trace)
        assert spec is not None
        trace_id, loaded, _ = await self.record(spec, [target] if target else [], None, timeout_s)
        return trace_id, loaded

    @staticmethod
    def run_of(trace: backend.Trace, kernel: str | None, target: str | None) -> backend.KernelRun:
        if target is not None:
            target = backend.canonical_targets([target])[0]
        return trace.find_run(kernel, target)

    # --- tools --------------------------------------------------------------------------------

    @tool_errors
    async def list_targets(self) -> CallToolResult:
        """Every target TileLang lowers for here (no GPU needed), with vendor, family, chips and aliases."""
        table = backend.target_table()
        summary = ", ".join(row["name"] for row in table)
        return result(f"{len(table)} targets: {summary}", {"targets": table})

    @tool_errors
    async def lower_kernel(
        self,
        spec: Spec,
        targets: Targets = None,
        pass_configs: Configs = None,
        timeout_s: Timeout = None,
        pass_list: Annotated[
            bool | None,
            Field(
                description="List each run's passes (time, changed, +/- lines). Default: only when "
                "one run was lowered; for several targets each run is a one-line summary."
            ),
        ] = None,
    ) -> CallToolResult:
        """Lower a kernel through TileLang's real pipeline for one or more targets. Returns each
        run's status, time and pass counts, and for one target (or pass_list=true) its passes with
        their time, whether they changed the IR and +/- lines; for a failure, the failing pass, its
        error and the IR it received. Returns a trace id for get_ir, diff_passes and check_trace."""
        trace_id, trace, recorded = await self.record(spec, targets or [], pass_configs, timeout_s)
        stopped = recorded.stopped
        instances = {(found.kernel, found.target): found for found in recorded.instances}
        runs = []
        lines = []
        rows_left = MAX_PASS_ROWS
        listed = pass_list if pass_list is not None else len(trace.runs) == 1
        for run in trace.runs:
            data = backend.run_summary(trace, run)
            instance = instances.get((run.kernel, run.target))
            if instance is not None:  # the resolver's words, as the language server's hover says them
                data["instance"] = backend.instance_document(instance)
            if listed:
                rows = backend.pass_rows(trace, run)
                data["pass_list"] = rows[:rows_left]
                if len(rows) > rows_left:
                    data["pass_list_note"] = (
                        f"{len(rows) - rows_left} more passes not listed; call lower_kernel for fewer targets"
                    )
                rows_left = max(0, rows_left - len(rows))
            received = backend.failure_input(trace, run)
            if received is not None:
                label, text = received
                ask = (
                    f"call get_ir(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, "
                    f"pass_name={label!r}, side='before')"
                )
                if listed:
                    shown, info = page(text, 0, FAILURE_IR_LINES, ask, max_chars=MAX_STRING_CHARS // 2)
                    data["ir_received"] = shown
                    data["ir_received_info"] = info
                else:
                    data["ir_received_info"] = {"note": f"the IR it received: {ask}"}
            runs.append(data)
            lines.append(_run_line(data))
            if instance is not None:
                lines.append(f"  analyzed `{instance.call}`: arguments from {instance.origin}")
        if stopped:
            lines.append(f"stopped early: {stopped}")
        data = {"trace": trace_id, "resource": f"trace://{trace_id}", "stopped": stopped, "runs": runs}
        if not listed:
            data["pass_list_note"] = (
                f"{len(runs)} runs, so their passes are not listed: call lower_kernel again with "
                f"pass_list=true or with one target, or get_ir(trace={trace_id!r}, target=..., pass_name=...)"
            )
            lines.append(data["pass_list_note"])
        return result("\n".join([*lines, f"trace {trace_id} (resource trace://{trace_id})"]), data)

    @tool_errors
    async def get_ir(
        self,
        pass_name: Annotated[
            str,
            Field(
                description="Pass as NAME or NAME#N (the Nth time it ran), e.g. tl.LayoutInference; "
                "`source` for the final kernel source."
            ),
        ],
        trace: TraceRef = None,
        spec: OptionalSpec = None,
        target: Target = None,
        kernel: Kernel = None,
        side: Annotated[
            Literal["after", "before"], Field(description="The IR after the pass, or the IR it received.")
        ] = "after",
        offset: Offset = 0,
        limit: Limit = DEFAULT_LINES,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """The IR after (or before) one pass of a lowering, or its final kernel source, exactly as
        the pipeline printed it; long texts come in pages (offset/limit)."""
        trace_id, loaded = await self.trace_or_spec(trace, spec, target, timeout_s)
        run = self.run_of(loaded, kernel, target)
        label, text = backend.find_ir(loaded, run, pass_name, side)
        how = (
            f"call get_ir(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, "
            f"pass_name={label!r}"
        )
        shown, info = page(text, offset, limit, how + (", side='before')" if side == "before" else ")"))
        data = {"trace": trace_id, "kernel": run.kernel, "target": run.target, "pass": label, "side": side}
        data |= info | {"text": shown}
        where = "kernel source" if label == backend.SOURCE else f"IR {side} {label}"
        summary = f"{where} of {run.kernel} on {run.target} (trace {trace_id})"
        if "note" in info:
            summary += f"; {info['note']}"
        return result(summary, data, shown)

    @tool_errors
    async def diff_passes(
        self,
        from_pass: Annotated[str, Field(description="First pass, NAME or NAME#N.")],
        to_pass: Annotated[
            str | None, Field(description="Last pass (default: from_pass, i.e. what that one pass did).")
        ] = None,
        trace: TraceRef = None,
        spec: OptionalSpec = None,
        target: Target = None,
        kernel: Kernel = None,
        normalize: Normalize = True,
        context: Annotated[int, Field(description="Lines of context around each change.", ge=0, le=50)] = 3,
        offset: Offset = 0,
        limit: Limit = DEFAULT_LINES,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """What the passes from_pass through to_pass did together: the IR before from_pass against
        the IR after to_pass, as a unified diff (paged with offset/limit)."""
        trace_id, loaded = await self.trace_or_spec(trace, spec, target, timeout_s)
        run = self.run_of(loaded, kernel, target)
        last = to_pass or from_pass
        diff = backend.pass_span_diff(loaded, run, from_pass, last, normalize)
        text = diff.unified(f"before {from_pass}", f"after {last}", context)
        how = (
            f"call diff_passes(trace={trace_id!r}, kernel={run.kernel!r}, target={run.target!r}, "
            f"from_pass={from_pass!r}, to_pass={last!r})"
        )
        shown, info = page(text, offset, limit, how)
        data = {
            "trace": trace_id,
            "kernel": run.kernel,
            "target": run.target,
            "from_pass": from_pass,
            "to_pass": last,
            "equal": diff.is_empty,
            "added": diff.added,
            "removed": diff.removed,
            **info,
            "diff": shown,
        }
        summary = f"{run.kernel} on {run.target}: {from_pass}..{last} " + (
            "changed nothing" if diff.is_empty else f"+{diff.added} -{diff.removed} lines"
        )
        return result(summary, data, shown or "(no change)")

    @tool_errors
    async def diff_lowerings(
        self,
        spec: Spec,
        target_a: Annotated[
            str | None, Field(description="Target of lowering A (default: the kernel dialect's default).")
        ] = None,
        target_b: Annotated[str | None, Field(description="Target of lowering B (default target_a).")] = None,
        pass_configs_a: Configs = None,
        pass_configs_b: Configs = None,
        spec_b: Annotated[
            str | None,
            Field(
                description="Another spec for B (other arguments, another file); default spec.",
                max_length=backend.MAX_SPEC_CHARS,
            ),
        ] = None,
        kernel: Kernel = None,
        normalize: Normalize = True,
        context: Annotated[int, Field(description="Lines of context around each change.", ge=0, le=50)] = 3,
        offset: Offset = 0,
        limit: Limit = DEFAULT_LINES,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """Two lowerings compared pass by pass (two targets, two pass configs, or two specs): the
        first pass where their IR parts, the diff right after it, passes only one ran, and whether
        the kernel sources differ."""
        if target_b is None and pass_configs_b is None and spec_b is None:
            raise ToolError("give what B changes: target_b, pass_configs_b or spec_b")
        targets_a = [target_a] if target_a else []
        targets_b = [target_b] if target_b else targets_a
        trace_a_id, trace_a, _ = await self.record(spec, targets_a, pass_configs_a, timeout_s)
        trace_b_id, trace_b, _ = await self.record(spec_b or spec, targets_b, pass_configs_b, timeout_s)
        run_a = self.run_of(trace_a, kernel, target_a)
        run_b = self.run_of(trace_b, kernel if spec_b is None else None, target_b or target_a)
        comparison = backend.compare_lowerings(trace_a, run_a, trace_b, run_b, normalize)
        first = comparison.first_difference
        data: dict[str, Any] = {
            "trace_a": trace_a_id,
            "trace_b": trace_b_id,
            "a": backend.run_summary(trace_a, run_a),
            "b": backend.run_summary(trace_b, run_b),
            "different": comparison.different,
            "first_difference": None,
            "passes_only_a": list(comparison.removed_passes),
            "passes_only_b": list(comparison.added_passes),
            "passes_moved": list(comparison.moved_passes),
            "notes": list(comparison.notes),
        }
        if comparison.source_diff is not None:
            data["source"] = {
                "equal": comparison.source_diff.is_empty,
                "added": comparison.source_diff.added,
                "removed": comparison.source_diff.removed,
            }
        shown = ""
        if first is not None:
            data["first_difference"] = {
                "pass_a": first.label_a,
                "pass_b": first.label_b,
                "status": first.status,
                "input_differs": comparison.input_differs,
                "compared_with": comparison.compared_with_label,
            }
            if comparison.diff is not None:
                text = comparison.diff.unified(
                    f"a/{first.label_a or comparison.compared_with_label}",
                    f"b/{first.label_b or comparison.compared_with_label}",
                    context,
                )
                shown, info = page(text, offset, limit, "call diff_lowerings again with the same arguments")
                data["diff"] = shown
                data["diff_info"] = info
        if first is None:
            summary = "the two lowerings print the same IR after every pass they share"
        else:
            label = first.label_a or first.label_b
            only = {"only_a": " (only A ran it)", "only_b": " (only B ran it)"}.get(first.status, "")
            cause = "; its input already differed" if comparison.input_differs else ""
            summary = f"IR first differs after {label}{only}{cause}"
        if "source" in data:
            summary += "; kernel sources " + ("are equal" if data["source"]["equal"] else "differ")
        return result(
            summary, data, backend.dump({k: v for k, v in data.items() if k != "diff"}) + "\n" + shown
        )

    @tool_errors
    async def buffer_facts(
        self,
        spec: Spec,
        line: Annotated[
            int | None,
            Field(description="Source line (1-based) to report buffers of; all when omitted.", ge=1),
        ] = None,
        target: Target = None,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """The buffers of a kernel as the compiler sees them after layout inference (as the language
        server's hover shows): shape, allocated shape (pipeline stages), dtype, scope, inferred layout
        (fragment threads and elements per thread, or the swizzle) and bytes."""
        answer = await self.job(Facts, spec, timeout_s, target=self._target(target), line=line)
        lines = []
        for kernel in answer["kernels"]:
            head = f"{kernel['kernel']} on {kernel['target']}"
            if not kernel["reached"]:
                head += f": did not reach {kernel['stop_pass']}: {kernel['error']}"
            lines.append(head)
            lines.extend(f"  {_buffer_line(buffer)}" for buffer in kernel["buffers"])
        if line is not None and not any(kernel["buffers"] for kernel in answer["kernels"]):
            lines.append(f"no buffer is declared on line {line}")
        return result("\n".join(lines), answer)

    @tool_errors
    async def diagnostics(
        self, spec: Spec, target: Target = None, timeout_s: Timeout = None
    ) -> CallToolResult:
        """Errors and warnings from TileLang's real frontend and pipeline for a kernel file (its
        module-level PrimFuncs) or one kernel spec: syntax and import errors, build errors, the
        failing pass, and the warnings TileLang's checks log (buffer read before written, data race)."""
        answer = await self.job(Diagnostics, spec, timeout_s, target=self._target(target))
        found = answer["diagnostics"]
        lines = [
            f"{Path(d['file'] or '?').name}:{d['line'] or '?'}: {d['severity']} [{d['code']}] "
            f"{(d['message'].splitlines() or [''])[0]}"
            for d in found
        ]
        errors = sum(d["severity"] == "error" for d in found)
        head = f"{errors} error(s), {len(found) - errors} warning(s) in {len(answer['kernels'])} kernel(s)"
        return result("\n".join([head, *lines]), answer)

    @tool_errors
    async def machine_code(
        self,
        spec: Spec,
        target: Annotated[str, Field(description="A CUDA target, e.g. cuda:sm_90a.")] = DEFAULT_TARGET,
        bench: Annotated[
            bool, Field(description="Also launch the kernel and measure its latency (needs a CUDA GPU).")
        ] = False,
        pass_configs: Configs = None,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """Compile a kernel's CUDA source with nvcc (ptxas -v) and report per kernel function its
        registers, spilled bytes, static and dynamic shared memory, barriers and stack; with
        bench, its measured latency on the GPU."""
        trace_id, trace, recorded = await self.record(
            spec, [target], pass_configs, timeout_s, machine_code=True, bench=bench
        )
        stopped = recorded.stopped
        runs = [backend.run_summary(trace, run) for run in trace.runs]
        lines = []
        for run, data in zip(trace.runs, runs, strict=True):
            lines.append(_run_line(data))
            lines.extend(f"  {text}" for text in backend.resource_lines(run))
            if run.status == "ok" and not run.resources:
                lines.append("  no machine code: only CUDA targets are compiled with nvcc")
        if stopped:
            lines.append(f"stopped early: {stopped}")
        return result("\n".join(lines), {"trace": trace_id, "stopped": stopped, "runs": runs})

    @tool_errors
    async def coverage_matrix(
        self,
        spec: Spec,
        targets: Annotated[
            list[str] | None, Field(description="Targets (default: all targets of the kernel's dialect).")
        ] = None,
        pass_configs: Configs = None,
        timeout_s: Timeout = None,
    ) -> CallToolResult:
        """Lower a kernel for every target and say where it lowers and where not: one cell per
        kernel x target, failures grouped by root cause (failing pass and error)."""
        trace_id, trace, recorded = await self.record(spec, targets or ["all"], pass_configs, timeout_s)
        stopped = recorded.stopped
        document, markdown = backend.coverage_document(trace)
        document = {"trace": trace_id, "stopped": stopped, **document}
        failures = sum(cell["status"] != "ok" for cell in document["cells"])
        summary = f"{len(document['cells']) - failures} ok, {failures} failed (trace {trace_id})"
        if stopped:
            summary += f"; stopped early: {stopped}"
        return result(summary, document, markdown)

    @tool_errors
    async def check_trace(
        self,
        trace: Annotated[str, Field(description="The new trace: a session trace id (t2) or a trace file.")],
        baseline: Annotated[str, Field(description="The baseline: a session trace id (t1) or a trace file.")],
        policy: Annotated[
            str | None,
            Field(description="An irtrace-policy.toml under the roots (default: irtrace's defaults)."),
        ] = None,
    ) -> CallToolResult:
        """Check a trace against a baseline as `irtrace check` does: per kernel x target, added,
        removed or newly failing runs, the first pass whose IR changed, pass list and kernel source
        changes, time and metrics; `gated` says whether the policy fails it."""
        _, new = await self.load(trace)
        _, old = await self.load(baseline)
        policy_path = str(self.config.roots.check(policy, "policy file")) if policy is not None else None
        document, text = backend.check_report(new, old, policy_path)
        lines = text.strip().splitlines()
        # the counts and the verdict (render_text's second and last lines); the whole text follows
        return result(f"{lines[1]}\n{lines[-1]}", document, text)

    @tool_errors
    async def source_line_ir(
        self,
        line: line_tool.Line,
        spec: OptionalSpec = None,
        trace: TraceRef = None,
        target: Target = None,
        kernel: Kernel = None,
        pass_name: line_tool.PassName = None,
        timeout_s: Timeout = None,
        machine_code: line_tool.MachineCode = False,
    ) -> CallToolResult:
        """The IR lines a line of the kernel's file (a T.gemm, T.copy call) became after each pass, from
        a lowering with source maps: `spec` lowers it so, or give a `trace` recorded with them."""
        if (trace is None) == (spec is None):
            raise ToolError("give either `trace` (recorded with source maps) or `spec` (a kernel to lower)")
        if spec is not None:
            trace_id, _ = await line_tool.record_with_maps(self, spec, line, target, timeout_s, machine_code)
            path = self.traces[trace_id].path
        else:
            assert trace is not None
            trace_id, path = trace, self.trace_path(trace)
        # the answer is worked out in a child under the job's limits: the server relays it
        query = {"line": line, "kernel": kernel, "target": target, "pass_name": pass_name}
        answer = functools.partial(
            line_tool.answer_in_child, path, trace_id, query, self.config.memory_mb, self.config.timeout_s
        )
        return result(*await anyio.to_thread.run_sync(answer))

    def _target(self, target: str | None) -> str | None:
        """A target as irtrace names it; ``None`` is the kernel dialect's default."""
        return backend.canonical_targets([target])[0] if target else None


def _run_line(data: dict[str, Any]) -> str:
    line = f"{data['kernel']} on {data['target']}: {data['status']}"
    line += f", {data['passes']} passes ({data['changed']} changed)"
    if data.get("total_ms") is not None:
        line += f" in {data['total_ms']:g} ms"
    if data["status"] != "ok":
        where = data.get("failed_pass") or data.get("running") or "building the kernel"
        line += f"; failed in {where}: {data.get('error')}"
    return line


def _buffer_line(buffer: dict[str, Any]) -> str:
    shape = "[" + ", ".join(str(d) for d in buffer["shape"]) + "]"
    allocated = buffer["allocated_shape"]
    if len(allocated) == len(buffer["shape"]) + 1 and list(allocated[1:]) == list(buffer["shape"]):
        shape += f" x{allocated[0]}"
    text = f"{buffer['name']} {shape} {buffer['dtype']} {buffer['scope']}"
    if buffer.get("layout_short"):
        text += f" · {buffer['layout_short']}"
    if buffer.get("line"):
        text += f" (line {buffer['line']})"
    return text


async def serve(config: ServerConfig) -> None:
    """Speak MCP on the original stdout; everything else this process or its worker prints,
    native code included, goes to stderr (file descriptor 1 is pointed there)."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    app = TileLangMcp(config)

    async def prestart() -> None:
        try:
            async with app.worker.lock:
                await app.worker.start()
        except WorkerError as error:  # said again on the first call that needs it
            print(f"tilelang-mcp: {error}", file=sys.stderr)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(prestart)
        try:
            async with stdio_server(stdout=anyio.wrap_file(protocol)) as (read, write):
                # FastMCP.run_stdio_async writes to sys.stdout; this is it with our stream (mcp<2).
                low_level = app.server._mcp_server
                await low_level.run(read, write, low_level.create_initialization_options())
        finally:
            tasks.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await app.worker.stop()
