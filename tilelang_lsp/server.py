"""The language server object: documents, the worker, and analysis scheduling bound to versions.

Handlers live in ``tilelang_lsp.features`` (one LSP method per module); this module owns the
state they share. The process never imports tilelang: the worker does the compiling.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from tilelang_lsp import __version__
from tilelang_lsp.options import InitializationOptions
from tilelang_lsp.source import detect_dialect, imports_tilelang, looks_like_tilelang, syntax_problem
from tilelang_lsp.worker_client import (
    RequestCancelled,
    RequestFailed,
    WorkerClient,
    WorkerError,
    WorkerKilled,
)

log = logging.getLogger(__name__)

UNTRUSTED = "workspace not trusted"


@dataclass
class DocumentState:
    """One open document: its text, and analysis results with the version they came from."""

    uri: str
    path: str
    version: int
    text: str
    last_change: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the primary analysis of ``version`` has finished (or failed)."""
    task: asyncio.Task[None] | None = None
    background: asyncio.Task[None] | None = None
    analysis: dict[str, Any] | None = None
    """The worker's facts for ``analysis_version`` (primary targets, up to layout inference)."""
    analysis_version: int | None = None
    failure: str | None = None
    """Why there is no analysis for the current version (time limit, worker crash)."""
    failure_line: int | None = None
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Results for the extra targets, for ``extra_version``."""
    extra_version: int | None = None
    summary: dict[str, Any] | None = None
    """The full lowering (code lens), for ``summary_version``."""
    summary_version: int | None = None
    machine: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Kernel name -> ``{"resources": [...]}`` or ``{"error": ...}`` from nvcc, for ``machine_version``."""
    machine_version: int | None = None
    hints_cache: tuple[Any, list[Any]] | None = None
    """Inlay hints of the whole document and the state they were made from."""
    uses_tilelang: bool = True
    """Whether the current text is a TileLang file; other files get nothing (no hints, no diagnostics)."""
    runnable: bool = True
    """Whether analysis may execute the current text: it parses and has a real import of tilelang."""

    def current(self, version: int | None) -> bool:
        return version is not None and version == self.version


class TileLangLanguageServer(LanguageServer):
    """The tilelang-lsp server."""

    def __init__(self) -> None:
        super().__init__("tilelang-lsp", __version__)
        self.options = InitializationOptions()
        self.option_problems: list[str] = []
        self.documents: dict[str, DocumentState] = {}
        self.worker = self._make_worker()
        self.worker_start: asyncio.Task[None] | None = None
        """The early start from ``initialized``; held so the task is not collected mid-start."""
        self.untrusted_reported = False

    def _make_worker(self) -> WorkerClient:
        return WorkerClient(
            self.options.python,
            memory_limit_mb=self.options.worker_memory_limit_mb,
            warmup_target=self.options.default_target,
            on_restart=self._report_restart,
        )

    def configure(self, options: InitializationOptions, problems: list[str]) -> None:
        """Apply the client's initialization options."""
        self.options = options
        self.option_problems = problems
        self.worker = self._make_worker()

    def _report_restart(self, reason: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=reason))

    # --- documents -------------------------------------------------------------------------

    def open_document(self, uri: str, version: int, text: str) -> DocumentState:
        doc = DocumentState(uri=uri, path=to_fs_path(uri) or uri, version=version, text=text)
        self.documents[uri] = doc
        self.schedule(doc)
        return doc

    def change_document(self, uri: str, version: int, text: str) -> None:
        doc = self.documents.get(uri)
        if doc is None:
            self.open_document(uri, version, text)
            return
        doc.version, doc.text = version, text
        self.schedule(doc)

    def close_document(self, uri: str) -> None:
        doc = self.documents.pop(uri, None)
        if doc is None:
            return
        for task in (doc.task, doc.background):
            if task is not None:
                task.cancel()
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def schedule(self, doc: DocumentState) -> None:
        """Analyze the document's current version: at once after a quiet spell, else debounced.

        Analysis still running for older text is cancelled (the worker stops after its pass).
        """
        imports = imports_tilelang(doc.text)
        doc.runnable = imports is True
        # Text that does not parse runs nowhere; it is shown as a TileLang file (its syntax error,
        # source hints) when a line of it imports tilelang.
        doc.uses_tilelang = imports if imports is not None else looks_like_tilelang(doc.text)
        if not doc.uses_tilelang:
            # Decided from the parsed text before anything runs: any script's top level would run.
            for task in (doc.task, doc.background):
                if task is not None and not task.done():
                    task.cancel()
            doc.analysis = doc.summary = None
            doc.analysis_version = doc.summary_version = doc.extra_version = None
            doc.failure = doc.failure_line = None
            doc.done = asyncio.Event()
            doc.done.set()
            self.publish(doc)
            return
        now = time.monotonic()
        busy = doc.task is not None and not doc.task.done()
        quiet = now - doc.last_change > self.options.debounce_ms / 1000
        delay = 0.0 if quiet and not busy else self.options.debounce_ms / 1000
        doc.last_change = now
        for task in (doc.task, doc.background):
            if task is not None and not task.done():
                task.cancel()
        doc.done = asyncio.Event()
        doc.task = asyncio.create_task(self._analyze(doc, doc.version, delay, doc.done))

    def dialect(self, doc: DocumentState) -> str:
        return detect_dialect(doc.text)

    async def _analyze(self, doc: DocumentState, version: int, delay: float, done: asyncio.Event) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            if not self.options.trusted:
                self._report_untrusted()
                doc.failure, doc.failure_line = UNTRUSTED, None
                self.publish(doc)
                return
            if not doc.runnable:
                self._publish_syntax_error(doc, version)
                return
            params = {
                "path": doc.path,
                "text": doc.text,
                "default_target": self.options.default_target,
                "race_check": self.options.race_check,
            }
            try:
                result = await self.worker.request("analyze", params, timeout=self.options.analysis_timeout_s)
            except RequestCancelled:
                return
            except WorkerKilled as error:  # time or memory limit: shown at the kernel being built
                if doc.current(version):
                    doc.failure, doc.failure_line = str(error), error.progress.line
                    self.publish(doc)
                return
            except (WorkerError, RequestFailed) as error:
                if doc.current(version):
                    doc.failure, doc.failure_line = f"analysis failed: {error}", None
                    self.publish(doc)
                return
            if not doc.current(version):
                return  # a stale result is never published
            doc.analysis, doc.analysis_version = result, version
            doc.failure = doc.failure_line = None
            self.publish(doc)
            done.set()
            self.refresh()
            doc.background = asyncio.create_task(self._background(doc, version))
        finally:
            if doc.current(version):
                done.set()

    def _publish_syntax_error(self, doc: DocumentState, version: int) -> None:
        """Text that does not parse is never sent to the worker: its syntax error is found here."""
        line, message = syntax_problem(doc.text) or (1, "syntax error")
        diagnostic = {"message": message, "code": "syntax", "severity": "error", "line": line, "file": None}
        doc.analysis, doc.analysis_version = {"kernels": [], "diagnostics": [diagnostic]}, version
        doc.failure = doc.failure_line = None
        self.publish(doc)
        self.refresh()

    async def _background(self, doc: DocumentState, version: int) -> None:
        """Extra targets for hover, then the full lowering for the code lens summary, once idle."""
        await asyncio.sleep(self.options.background_delay_ms / 1000)
        extra = [t for t in self.options.extra_targets if (t == "ascend") == (self.dialect(doc) == "ascend")]
        primary = {k["target"] for k in (doc.analysis or {}).get("kernels", [])}
        params = {"path": doc.path, "text": doc.text, "default_target": self.options.default_target}
        timeout = self.options.analysis_timeout_s
        for target in extra:
            if target in primary and len(primary) == 1:
                continue
            try:
                result = await self.worker.request(
                    "analyze", {**params, "target": target, "race_check": False}, timeout=timeout
                )
            except (WorkerError, RequestFailed, RequestCancelled) as error:
                result = {"kernels": [], "diagnostics": [], "error": str(error)}
            if not doc.current(version):
                return
            if doc.extra_version != version:
                doc.extra, doc.extra_version = {}, version
            doc.extra[target] = result
        if not self.options.summary:
            return
        try:
            summary = await self.worker.request("analyze", {**params, "full": True}, timeout=timeout)
        except (WorkerError, RequestFailed, RequestCancelled):
            return
        if not doc.current(version):
            return
        doc.summary, doc.summary_version = summary, version
        self.publish(doc)
        self.refresh_code_lenses()
        if self.options.machine_code:
            await self._compile_machine_code(doc, version, summary)

    async def _compile_machine_code(self, doc: DocumentState, version: int, summary: dict[str, Any]) -> None:
        """Compile each CUDA kernel of the full lowering with nvcc, in a thread, for the code lens."""
        from irtrace.recording.machine_code import CompilePlan, compile_source

        doc.machine, doc.machine_version = {}, version
        for kernel in summary.get("kernels", []):
            request = kernel.get("machine_code")
            if not request:
                continue
            if "error" in request:
                doc.machine[kernel["name"]] = {"error": request["error"]}
                continue
            code = await asyncio.to_thread(
                compile_source,
                CompilePlan.from_json(request["plan"]),
                request["source"],
                dynamic_smem=request.get("dynamic_smem") or {},
                disassemble=False,
            )
            if not doc.current(version):
                return
            doc.machine[kernel["name"]] = (
                {"error": code.error}
                if code.error
                else {"resources": [r.to_json() | {"function": r.function} for r in code.resources]}
            )
            self.refresh_code_lenses()

    def refresh(self) -> None:
        """Ask the client to ask again for hints and lenses (when it supports refresh)."""
        workspace = self.client_capabilities.workspace
        if workspace is None:
            return
        if workspace.inlay_hint is not None and workspace.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)
        if workspace.code_lens is not None and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    def refresh_code_lenses(self) -> None:
        """Ask the client for lenses again, if it supports that (the summary came in)."""
        workspace = self.client_capabilities.workspace
        if workspace is not None and workspace.code_lens is not None and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    def _report_untrusted(self) -> None:
        if self.untrusted_reported:
            return
        self.untrusted_reported = True
        self.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Info,
                message=(
                    "tilelang-lsp: the workspace is not trusted, so kernels are not compiled (analysis "
                    "executes the module). Hints show what the source alone says."
                ),
            )
        )

    # --- diagnostics -----------------------------------------------------------------------

    def publish(self, doc: DocumentState) -> None:
        """Publish the diagnostics of the current version (nothing from older versions)."""
        from tilelang_lsp.diagnostics import document_diagnostics

        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=doc.uri, version=doc.version, diagnostics=document_diagnostics(self, doc)
            )
        )

    async def wait_for_analysis(self, doc: DocumentState) -> None:
        """Wait (up to ``hint_wait_s``) for the current version's analysis."""
        if not self.options.trusted:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(doc.done.wait(), self.options.hint_wait_s)

    def kernel_at(self, doc: DocumentState, line: int) -> dict[str, Any] | None:
        """The analyzed kernel whose definition is the last one at or above ``line`` (1-based)."""
        kernels = [k for k in (doc.analysis or {}).get("kernels", []) if k.get("line")]
        above = [k for k in kernels if k["line"] <= line]
        return max(above, key=lambda k: k["line"]) if above else None

    def file_matches(self, doc: DocumentState, file: str | None) -> bool:
        if not file:
            return False
        try:
            return Path(file).resolve() == Path(doc.path).resolve()
        except OSError:
            return False


def bind(handler: Callable[..., Any], server: TileLangLanguageServer) -> Callable[..., Any]:
    """``handler(server, params)`` as the one-argument callable pygls calls."""
    if inspect.iscoroutinefunction(handler):

        async def bound_async(params: Any) -> Any:
            return await handler(server, params)

        return bound_async

    def bound(params: Any) -> Any:
        return handler(server, params)

    return bound


def bind_command(handler: Callable[..., Any], server: TileLangLanguageServer) -> Callable[..., Any]:
    """A ``workspace/executeCommand`` handler taking the command's arguments."""

    async def bound(*arguments: Any) -> Any:
        return await handler(server, *arguments)

    return bound


def create_server() -> TileLangLanguageServer:
    """The server with every feature module registered."""
    from tilelang_lsp import features

    server = TileLangLanguageServer()
    for module in features.MODULES:
        options = getattr(module, "OPTIONS", None)
        server.feature(module.METHOD, options)(bind(module.handle, server))
    for name, handler in features.COMMANDS.items():
        server.command(name)(bind_command(handler, server))
    return server
