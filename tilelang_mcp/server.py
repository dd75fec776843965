"""The MCP server: tools that answer from TileLang's real pipelines, for coding agents.

Each tool is a module of ``tilelang_mcp.tools``; this module lists them with the input and output
schemas generated from their structs, decodes each call's arguments, runs the tool's ``handle``
on the session (``tilelang_mcp.session``) and turns what it raises into a tool error. Recorded
traces are resources. Tools that lower kernels send a job to the worker
(``tilelang_mcp.worker``), which forks a child per job; tools that read traces work here, on
files. This process never imports tilelang, and its stdout carries protocol messages only
(``serve``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anyio
import msgspec
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl

from irtrace import __version__
from tilelang_mcp import backend, tools
from tilelang_mcp.answers import call_result, clip
from tilelang_mcp.protocol import InvalidJob
from tilelang_mcp.roots import RootError
from tilelang_mcp.session import ServerConfig, Session, ToolError
from tilelang_mcp.worker_client import RequestCancelled, RequestFailed, WorkerClient, WorkerError

__all__ = ["INSTRUCTIONS", "ServerConfig", "TileLangMcp", "serve"]

INSTRUCTIONS = """\
TileLang's real compiler, for checking kernels you write. A kernel spec is `path.py::factory(args)`
(e.g. `kernels/gemm.py::matmul(1024, 1024, 1024, block_M=128)`), `path.py::jit_kernel(N=4096)`
or `path.py` for its module-level PrimFuncs; paths are relative to the first allowed root.
Targets: `cuda:sm_90a`, `hip:gfx942`, `metal`, `ascend`, ... (`list_targets`; `all` for every one).
Start with `lower_kernel`: it returns a trace id (`t1`) that `get_ir`, `diff_passes` and
`check_trace` accept instead of lowering again. Long texts come in pages: pass `offset` to read on.
Only files under the folders the user allowed run, each in a child process with a time limit."""

CALL_ERRORS = (
    ToolError,
    backend.IrtraceError,
    backend.JobError,
    InvalidJob,
    RootError,
    WorkerError,
    RequestFailed,
    RequestCancelled,
)
"""Errors a call can cause: each becomes a tool error with its one-line message, never a crash."""

log = logging.getLogger(__name__)


def object_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of ``struct`` with the struct itself at the top (MCP wants an object
    there) and the structs it holds under ``$defs``."""
    (reference,), components = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    name = reference["$ref"].rpartition("/")[2]
    schema = dict(components.pop(name))
    if components:
        schema["$defs"] = components
    return schema


@dataclass(frozen=True)
class RegisteredTool:
    """A tool module and what ``tools/list`` says of it."""

    module: ModuleType
    definition: types.Tool
    text_fields: frozenset[str]
    """Arguments that take text, which ``decode_arguments`` never reads as JSON."""

    @classmethod
    def of(cls, module: ModuleType) -> RegisteredTool:
        definition = types.Tool(
            name=module.NAME,
            description=module.DESCRIPTION,
            inputSchema=object_schema(module.Arguments),
            outputSchema=object_schema(module.Result),
        )
        info = msgspec.inspect.type_info(module.Arguments)
        assert isinstance(info, msgspec.inspect.StructType)
        text = frozenset(field.encode_name for field in info.fields if _takes_text(field.type))
        return cls(module, definition, text)

    def decode_arguments(self, arguments: dict[str, Any]) -> Any:
        """The call's arguments as the tool's ``Arguments``; a value of the wrong type or range is
        a tool error naming the argument. A list or an object sent as JSON text (as some clients
        do) is read as such, and a number or boolean sent as text is read as one (msgspec's lax
        mode), as the pydantic models of MCP's FastMCP did."""
        given = dict(arguments)
        for name, value in arguments.items():
            if isinstance(value, str) and name not in self.text_fields:
                with contextlib.suppress(ValueError, RecursionError):  # a JSON bomb stays text
                    parsed = json.loads(value)
                    if isinstance(parsed, list | dict):
                        given[name] = parsed
        try:
            return msgspec.convert(given, type=self.module.Arguments, strict=False)
        except msgspec.ValidationError as error:
            raise ToolError(f"invalid arguments: {error}") from None


def _takes_text(kind: msgspec.inspect.Type) -> bool:
    """Whether an argument of type ``kind`` may be text (its description and bounds looked past)."""
    if isinstance(kind, msgspec.inspect.Metadata):
        return _takes_text(kind.type)
    if isinstance(kind, msgspec.inspect.UnionType):
        return any(_takes_text(member) for member in kind.types)
    return isinstance(kind, msgspec.inspect.StrType)


class TileLangMcp:
    """The MCP server: the registered tools and the session they share."""

    def __init__(self, config: ServerConfig, worker: WorkerClient | None = None) -> None:
        self.session = Session(config, worker)
        self.session.resources_changed = self.notify_resources
        self.tools = {module.NAME: RegisteredTool.of(module) for module in tools.MODULES}
        self.server: Server[Any, Any] = Server("tilelang", version=__version__, instructions=INSTRUCTIONS)
        # the SDK's decorators are untyped; each registers one handler
        self.server.list_tools()(self.list_tools)  # type: ignore[no-untyped-call]
        self.server.call_tool(validate_input=False)(self.call_tool)
        self.server.list_resources()(self.list_resources)  # type: ignore[no-untyped-call]
        self.server.read_resource()(self.read_resource)  # type: ignore[no-untyped-call]

    async def list_tools(self) -> list[types.Tool]:
        return [tool.definition for tool in self.tools.values()]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Decode the arguments, run the tool, and answer; what goes wrong is a tool error."""
        tool = self.tools.get(name)
        if tool is None:
            return _tool_error(f"Unknown tool: {name}")
        try:
            answer = await tool.module.handle(self.session, tool.decode_arguments(arguments))
        except CALL_ERRORS as error:  # messages are cut as every string of an answer is
            return _tool_error(f"Error executing tool {name}: {clip(backend.describe_job_error(error))}")
        except Exception as error:  # a defect: say it in one line to the agent, in full on stderr
            log.exception("tool %s failed", name)
            return _tool_error(f"Error executing tool {name}: {clip(str(error))}")
        return call_result(answer)

    async def list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                uri=AnyUrl(f"trace://{stored.trace_id}"),
                name=stored.trace_id,
                description=f"Trace recorded by tilelang-mcp: {stored.what}",
                mimeType="application/json",
            )
            for stored in self.session.traces.values()
        ]

    async def read_resource(self, uri: AnyUrl) -> Iterable[ReadResourceContents]:
        """A recorded trace's runs in brief and its file (``Session.resource_document``)."""
        text = str(uri)
        stored = (
            self.session.traces.get(text.removeprefix("trace://")) if text.startswith("trace://") else None
        )
        if stored is None:
            raise ValueError(f"Unknown resource: {text}")
        return [ReadResourceContents(content=stored.document, mime_type="application/json")]

    async def notify_resources(self) -> None:
        with contextlib.suppress(Exception):  # outside a request, or a client that does not listen
            await self.server.request_context.session.send_resource_list_changed()


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


async def serve(config: ServerConfig) -> None:
    """Speak MCP on the original stdout; everything else this process or its worker prints,
    native code included, goes to stderr (file descriptor 1 is pointed there)."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    app = TileLangMcp(config)
    worker = app.session.worker

    async def prestart() -> None:
        try:
            async with worker.lock:
                await worker.start()
        except WorkerError as error:  # said again on the first call that needs it
            print(f"tilelang-mcp: {error}", file=sys.stderr)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(prestart)
        try:
            async with stdio_server(stdout=anyio.wrap_file(protocol)) as (read, write):
                await app.server.run(read, write, app.server.create_initialization_options())
        finally:
            tasks.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await worker.stop()
