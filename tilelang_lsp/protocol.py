"""The language server's requests to its worker and their answers, on the shared worker protocol.

The envelope (``Call``, ``Cancel``, ``Ready``, ``Warm``, ``Progress``, ``Result``, ``Failure``) is
``irtrace.edge.worker_protocol``'s, which the MCP server's worker speaks too; here are the
requests (``Analyze``, ``Trace``, ``IrAfterPass``, ``LineMaps``: a document's text and how to analyze it) and
the facts they answer with (``ApiIndex``, TileLang's API, is the server's own record, read from
source and cached, not a worker message). Imports no tilelang: the server process uses it.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from irtrace.edge.worker_protocol import (
    Call,
    Cancel,
    Failure,
    Progress,
    ProtocolError,
    Ready,
    Request,
    Result,
    Warm,
    WorkerCodec,
    decode_body,
    decode_from_worker,
    encode,
    message_id,
    raw,
)
from irtrace.facts.buffer_facts import BufferFact
from irtrace.targets.backends import DEFAULT_TARGET
from irtrace.trace.resources import KernelResources
from irtrace.trace.schema import InstructionCounts

__all__ = [  # the shared envelope, so that this module names every message the worker speaks
    "Call",
    "Cancel",
    "Failure",
    "Progress",
    "ProtocolError",
    "Ready",
    "Request",
    "Result",
    "Warm",
    "decode_body",
    "decode_from_worker",
    "encode",
    "message_id",
    "raw",
]

Buffer = BufferFact
"""One buffer of a kernel as the compiler sees it after layout inference (hints and hover): the
core's struct, sent as is, symbolic sizes under the names the source gives them."""

OK: Final = "ok"
FAILED: Final = "failed"

# --- results -----------------------------------------------------------------------------------


class Diagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """An error or warning from the frontend or the compiler, at a line of the document."""

    message: str
    severity: Literal["error", "warning", "info"] = "error"
    code: str = "lowering"
    """``syntax``, ``import``, ``frontend``, ``layout-inference``, ``data-race``, ``arguments``, ..."""
    line: int | None = None
    """1-based line; the kernel's line when the compiler gave none in the document."""
    column: int | None = None
    file: str | None = None
    related: tuple[str, ...] = ()
    """Further locations (``file:line``) the message names."""
    located: bool = True
    """Whether the compiler named the line (else it is the kernel's)."""


class CompileInput(msgspec.Struct, frozen=True, kw_only=True):
    """What compiling one CUDA kernel source for the code lens needs: TileLang's nvcc command as
    the worker planned it (``irtrace.lowering.machine_code.CompilePlan``), the source, and each
    kernel function's dynamic shared memory (ptxas knows only the static part)."""

    nvcc: str
    disassembler: str
    arch: str
    options: tuple[str, ...]
    timeout_s: float | None
    source: str
    dynamic_smem: dict[str, int | None] = {}


class KernelAnalysis(msgspec.Struct, frozen=True, kw_only=True):
    """One kernel of a document: the arguments and target it was analyzed with and what came out."""

    name: str
    kind: str
    """How the file defines it (``irtrace.lowering.loader``'s kernel kinds)."""
    line: int | None
    """1-based line of its definition."""
    target: str
    target_origin: str
    """Where the target came from (``directive (line 7)``, ``default target``, ...)."""
    call: str
    """The call analyzed, ``matmul(1024, 1024, 1024, block_M=128)``."""
    args_origin: str
    args_from_project: tuple[str, ...] = ()
    """Parameters filled from ``[tool.tilelang-lsp]`` in pyproject.toml."""
    args_symbolic: tuple[str, ...] = ()
    """Parameters and ``T.const`` sizes nobody gave a value for, analyzed as symbols of their names."""
    args_unknown: tuple[str, ...] = ()
    """Parameters a real run passed something that cannot be made again here (an object)."""
    needs_values: tuple[str, ...] = ()
    """Parameters without a value that the kernel cannot take as symbols: a directive or a
    recorded run would give them (its hints stay source-only and say so)."""
    args_autotune: dict[str, str] = {}
    """Parameters taken from the first ``@autotune`` config, each value's ``repr``."""
    args: dict[str, str] = {}
    """Keyword arguments as written in ``call``."""
    instances: tuple[str, ...] = ()
    """Labels of the real instances found (recorded test ids, ``__main__``), for the code lens."""
    status: Literal["ok", "failed"] = OK
    error: str | None = None
    buffers: tuple[Buffer, ...] = ()
    full: bool = False
    """Whether the whole pipeline ran (the code lens summary), not only up to layout inference."""
    build_ms: float | None = None
    passes: int = 0
    pass_names: tuple[str, ...] = ()
    lowering_ms: float = 0.0
    stop_pass: str | None = None
    """The pass the lowering stopped after (layout inference); ``None`` for a full lowering."""
    failed_pass: str | None = None
    shared_bytes: int | None = None
    machine_code: CompileInput | None = None
    """A full CUDA lowering's source and nvcc plan, for the resource lens."""
    machine_code_error: str | None = None
    """Why there is no plan (no nvcc)."""


class AnalysisResult(msgspec.Struct, frozen=True, kw_only=True):
    """What analyzing one document gave: its kernels and the diagnostics found on the way."""

    kernels: tuple[KernelAnalysis, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    dialect: str | None = None
    skipped: str | None = None
    """Why nothing ran (the text does not import tilelang)."""
    elapsed_ms: float = 0.0


class TraceResult(msgspec.Struct, frozen=True, kw_only=True):
    """A trace file written for passviz, and the kernels lowered into it."""

    output: str
    kernels: tuple[KernelAnalysis, ...] = ()


class IrText(msgspec.Struct, frozen=True, kw_only=True):
    """The IR of a kernel after one pass of its full lowering."""

    kernel: str
    target: str
    pass_name: str
    index: int
    text: str


class LineStage(msgspec.Struct, frozen=True, kw_only=True):
    """The IR lines a Python line became after a pass, or after consecutive passes that printed
    the same text (``irtrace.facts.source_map.LineInPass``)."""

    first: str
    """The pass label (``name`` or ``name#N``)."""
    first_index: int
    last: str
    last_index: int
    ir_lines: tuple[int, ...]
    """Lines of the module's print (from 1) that print a statement whose span is the Python line."""
    text: tuple[str, ...]
    """Those lines as printed."""
    carried: tuple[int, ...] = ()
    """Of ``ir_lines``, those without a span of the line that are provably its statements: carried
    over a pass that dropped the span, or inside a block of the line (those are in ``owned`` too)."""
    owned: tuple[int, ...] = ()
    """Of ``carried``, those inside a block of the line, not carried over a pass."""
    used_by: tuple[int, ...] = ()
    """For a line that made no statement but binds a value, or whose bind this pass inlined
    (``inlined``): the lines reading it, whose IR ``ir_lines`` are (``LineInPass.used_by``)."""
    inlined: bool = False
    """Whether ``used_by`` stands for a bind of the line that a pass inlined (``LineInPass.inlined``)."""


class LineThroughPasses(msgspec.Struct, frozen=True, kw_only=True):
    """One Python line of the kernel's file and what it became, pass by pass."""

    line: int
    stages: tuple[LineStage, ...] = ()
    source_lines: tuple[int, ...] = ()
    """Lines of the generated kernel source (from 1) the Python line became, by TileLang's own
    ``#line`` directives (``irtrace.facts.source_map.generated_lines``)."""


class SourceLines(msgspec.Struct, frozen=True, kw_only=True):
    """A kernel's full lowering recorded with source maps: for each line of the document that some
    module's statements carry as their span, the IR lines it became after each pass."""

    kernel: str
    target: str
    passes: tuple[str, ...] = ()
    """Every pass label of the run, by pass index."""
    lines: tuple[LineThroughPasses, ...] = ()
    lowering_ms: float = 0.0
    source_language: str = ""
    """``CUDA``, ``HIP``, ...: the generated source's language."""
    source_mapped: bool = False
    """Whether the generated source is mapped at all (its backend's codegen writes ``#line``)."""
    not_run: tuple[int, ...] = ()
    """Statement lines of the kernel the frontend did not run for this instance (``AuthorLines.skipped``)."""
    sass_input: CompileInput | None = None
    """A CUDA run's nvcc plan and source, for the SASS instructions per line (the hover's nvcc job)."""
    sass_error: str | None = None
    """Why there is no ``sass_input`` on a CUDA target (no nvcc or nvdisasm)."""
    kernel_source_lines: tuple[tuple[int, int], ...] = ()
    """``(source_line, python_line)``: the kernel source's ``#line`` map, for the document's file."""


class CompileJob(msgspec.Struct, frozen=True):
    """One kernel for the nvcc job (``python -m tilelang_lsp.worker.machine_code``), which gets a
    JSON array of them on stdin and answers each with a ``CompiledKernel`` line."""

    kernel: str
    input: CompileInput
    python_lines: tuple[tuple[int, int], ...] | None = None
    """With it (``SourceLines.kernel_source_lines``), the job also lists the SASS with nvdisasm's
    line table and counts each Python line's instructions by class."""


class CompiledKernel(msgspec.Struct, frozen=True, kw_only=True):
    """What nvcc and ptxas said of one kernel's source: its functions' resources, or its error."""

    kernel: str
    resources: tuple[KernelResources, ...] = ()
    error: str | None = None
    line_counts: tuple[tuple[int, InstructionCounts], ...] = ()
    """``(python_line, counts)`` for the lines some SASS instruction came from (``python_lines``)."""


# --- requests (server to worker) ---------------------------------------------------------------


class DocumentRequest(Request, frozen=True, kw_only=True):
    """A document's text to run in the worker (it is not read from disk: it may be unsaved)."""

    path: str
    text: str
    default_target: str = DEFAULT_TARGET
    target: str | None = None
    """Analyze for this target instead of each kernel's own."""
    instance_traces: tuple[str, ...] = ()
    """Trace files whose recorded instances the kernels are analyzed with."""
    instance_picks: dict[str, str] = {}  # noqa: RUF012 (msgspec copies an empty default)
    """Per kernel, the instance the user picked (its label)."""


class Analyze(DocumentRequest, frozen=True, kw_only=True, tag="analyze"):
    """Each kernel built and lowered up to layout inference, or the whole pipeline (``full``)."""

    answer = AnalysisResult
    full: bool = False
    race_check: bool = True


class Trace(DocumentRequest, frozen=True, kw_only=True, tag="trace"):
    """One kernel lowered through the whole pipeline into the trace file ``output``."""

    answer = TraceResult
    kernel: str
    output: str


class IrAfterPass(DocumentRequest, frozen=True, kw_only=True, tag="irAfterPass"):
    """The IR after ``pass_name`` (``name`` or ``name#2``) of one kernel's full lowering."""

    answer = IrText
    kernel: str
    pass_name: str


class LineMaps(DocumentRequest, frozen=True, kw_only=True, tag="lineMaps"):
    """One kernel's full lowering recorded with source maps (asked on the first hover of a tile
    operation, not on every edit: maps print each module twice)."""

    answer = SourceLines
    kernel: str


WorkerRequest = Analyze | Trace | IrAfterPass | LineMaps
CODEC: WorkerCodec[WorkerRequest] = WorkerCodec(WorkerRequest)
decode_to_worker = CODEC.decode_to_worker


class ApiParameter(msgspec.Struct, frozen=True, kw_only=True):
    """One parameter of an API function, as its ``def`` writes it."""

    name: str
    text: str
    """The parameter as written in the signature: ``transpose_A: 'bool' = False``."""
    kind: Literal["positional", "keyword", "var_positional", "var_keyword"] = "positional"
    """``keyword`` is keyword-only; ``positional`` takes a position (and maybe a keyword)."""


class ApiEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One public name of a TileLang module (completion, signature help, hover, definition)."""

    name: str
    kind: Literal["module", "class", "function", "value"]
    module: str | None = None
    """For a module: its full name, so that ``tilelang.language.`` completes its names."""
    signature: str | None = None
    """``(A, B, C, transpose_A: bool = False, ...) -> None``, as the ``def`` writes it."""
    parameters: tuple[ApiParameter, ...] = ()
    doc: str = ""
    """The docstring's first lines."""
    file: str | None = None
    line: int | None = None
    """1-based line of the ``def``/``class`` in ``file``."""


class ApiModule(msgspec.Struct, frozen=True, kw_only=True):
    """A module users write (``tilelang.language``) and its public names."""

    name: str
    entries: tuple[ApiEntry, ...] = ()
    same_as: str | None = None
    """The module listed earlier whose names these are (``tilelang.cuda.language``: the same
    objects as ``tilelang.language``), sent once."""


class ApiIndex(msgspec.Struct, frozen=True, kw_only=True, tag="apiIndex", tag_field="kind"):
    """TileLang's public API, read from its source files by the server
    (``tilelang_lsp.api.source_index``) for its static features, and cached on disk."""

    tilelang_version: str
    folder: str
    """The ``tilelang`` package folder it was read from."""
    modules: tuple[ApiModule, ...] = ()
    elapsed_s: float = 0.0


def to_json(value: msgspec.Struct) -> object:
    """Plain JSON data (for an LSP answer: pygls does not know msgspec's Structs)."""
    return msgspec.to_builtins(value)
