"""The language server object: documents, the worker, and analysis scheduling bound to versions.

Handlers live in ``tilelang_lsp.features`` (one LSP method per module) and are registered by
``tilelang_lsp.app``; this module owns the state they share. Each open document is an immutable
``Document`` snapshot, replaced whole when an edit or a result for its version arrives. The
process never imports tilelang: the worker does the compiling, a short job runs nvcc.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from irtrace.targets.backends import dialect_of_source
from irtrace.trace.instances import instance_trace_files
from tilelang_lsp import __version__
from tilelang_lsp.api.catalog import ApiCatalog
from tilelang_lsp.compile_job import compile_kernels
from tilelang_lsp.diagnostics import document_diagnostics
from tilelang_lsp.document import UNTRUSTED, Document, ExtraTarget, Failure
from tilelang_lsp.line_maps import LineMapCache
from tilelang_lsp.options import InitializationOptions
from tilelang_lsp.pictures import LayoutPictures
from tilelang_lsp.protocol import AnalysisResult, Analyze, CompiledKernel, CompileJob, Diagnostic
from tilelang_lsp.source.text import imports_tilelang, looks_like_tilelang, syntax_problem
from tilelang_lsp.worker_client import (
    RequestCancelled,
    RequestFailed,
    WorkerClient,
    WorkerError,
    WorkerKilled,
)

log = logging.getLogger(__name__)


@dataclass
class DocumentJobs:
    """The analysis running for one document (touched on the event loop only, by ``schedule``)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the primary analysis of the latest version has finished (or failed)."""
    task: asyncio.Task[None] | None = None
    background: asyncio.Task[None] | None = None
    """Extra targets, the full lowering and nvcc, once the primary analysis is in."""
    last_change: float = 0.0

    def cancel(self) -> None:
        for task in (self.task, self.background):
            if task is not None and not task.done():
                task.cancel()


class TileLangLanguageServer(LanguageServer):
    """The tilelang-lsp server."""

    def __init__(self) -> None:
        super().__init__("tilelang-lsp", __version__)
        self.options = InitializationOptions()
        self.option_problems: list[str] = []
        self.documents: dict[str, Document] = {}
        """Each open document's latest snapshot, by URI."""
        self.jobs: dict[str, DocumentJobs] = {}
        self.hint_cache: dict[str, tuple[Document, list[types.InlayHint]]] = {}
        self.instance_picks: dict[str, dict[str, str]] = {}
        """Per document, per kernel: the instance the user picked with the code lens."""
        """Each document's inlay hints and the snapshot they were made from."""
        self.api = ApiCatalog()
        """TileLang's API for completion, signature help, API hover and definition."""
        self.worker = self._make_worker()
        self.worker_start: asyncio.Task[None] | None = None
        """The early start from ``initialized``; held so the task is not collected mid-start."""
        self.untrusted_reported = False
        self.pictures = LayoutPictures()
        """The hover's layout pictures."""
        self.line_maps = LineMapCache()
        """The hover's source-line maps, per document version (lowered on the first hover)."""

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

    def open_document(self, uri: str, version: int, text: str) -> None:
        self.documents[uri] = Document(uri=uri, path=to_fs_path(uri) or uri, version=version, text=text)
        self.schedule(uri)

    def change_document(self, uri: str, version: int, text: str) -> None:
        doc = self.documents.get(uri)
        if doc is None:
            self.open_document(uri, version, text)
            return
        self.documents[uri] = replace(doc, version=version, text=text)
        self.schedule(uri)

    def close_document(self, uri: str) -> None:
        doc = self.documents.pop(uri, None)
        self.hint_cache.pop(uri, None)
        self.line_maps.forget(uri)
        jobs = self.jobs.pop(uri, None)
        if jobs is not None:
            jobs.cancel()
        if doc is not None:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def update(self, uri: str, version: int, **changes: Any) -> Document | None:
        """Replace the document's snapshot with ``changes`` made for ``version``; nothing (``None``)
        when the document moved on to another version or was closed: a stale result is dropped."""
        doc = self.documents.get(uri)
        if doc is None or not doc.current(version):
            return None
        doc = replace(doc, **changes)
        self.documents[uri] = doc
        return doc

    def schedule(self, uri: str) -> None:
        """Analyze the document's current version: at once after a quiet spell, else debounced.

        Analysis still running for older text is cancelled (the worker stops after its pass).
        """
        doc = self.documents[uri]
        jobs = self.jobs.setdefault(uri, DocumentJobs())
        self.line_maps.forget(uri)
        imports = imports_tilelang(doc.text)
        # Text that does not parse runs nowhere; it is shown as a TileLang file (its syntax error,
        # source hints) when a line of it imports tilelang.
        uses_tilelang = imports if imports is not None else looks_like_tilelang(doc.text)
        doc = replace(doc, runnable=imports is True, uses_tilelang=uses_tilelang)
        if not uses_tilelang:
            # Decided from the parsed text before anything runs: any script's top level would run.
            jobs.cancel()
            doc = replace(
                doc,
                analysis=None,
                summary=None,
                analysis_version=None,
                summary_version=None,
                extra_version=None,
                failure=None,
            )
            self.documents[uri] = doc
            jobs.done = asyncio.Event()
            jobs.done.set()
            self.publish(doc)
            return
        self.documents[uri] = doc
        now = time.monotonic()
        busy = jobs.task is not None and not jobs.task.done()
        quiet = now - jobs.last_change > self.options.debounce_ms / 1000
        delay = 0.0 if quiet and not busy else self.options.debounce_ms / 1000
        jobs.last_change = now
        jobs.cancel()
        jobs.done = asyncio.Event()
        jobs.task = asyncio.create_task(self._analyze(uri, doc.version, delay, jobs.done))

    def _analysis_request(self, doc: Document, **overrides: Any) -> Analyze:
        return Analyze(
            path=doc.path,
            text=doc.text,
            default_target=self.options.default_target,
            instance_traces=self.instance_traces(),
            instance_picks=self.instance_picks.get(doc.uri, {}),
            **overrides,
        )

    def instance_traces(self) -> tuple[str, ...]:
        """The trace files whose recorded instances kernels are analyzed with (``instanceTraces``,
        else ``irtrace.jsonl`` and ``.irtrace/*.jsonl`` in the workspace root), those that exist."""
        root = Path(self.workspace.root_path) if self.workspace.root_path else None
        if self.options.instance_traces:
            paths = [
                Path(p) if Path(p).is_absolute() or root is None else root / p
                for p in self.options.instance_traces
            ]
        elif root is not None:
            return instance_trace_files(root)
        else:
            paths = []
        return tuple(str(p) for p in paths if p.is_file())

    async def _analyze(self, uri: str, version: int, delay: float, done: asyncio.Event) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            doc = self.documents.get(uri)
            if doc is None or not doc.current(version):
                return
            if not self.options.trusted:
                self._report_untrusted()
                self._publish_if(self.update(uri, version, failure=Failure(UNTRUSTED)))
                return
            if not doc.runnable:
                self._publish_syntax_error(doc)
                return
            request = self._analysis_request(doc, race_check=self.options.race_check)
            try:
                result = await self.worker.request(request, timeout=self.options.analysis_timeout_s)
            except RequestCancelled:
                return
            except WorkerKilled as error:  # time or memory limit: shown at the kernel being built
                self._publish_if(self.update(uri, version, failure=Failure(str(error), error.progress.line)))
                self.refresh()  # the hints say why they stay source-only
                return
            except (WorkerError, RequestFailed) as error:
                self._publish_if(self.update(uri, version, failure=Failure(f"analysis failed: {error}")))
                self.refresh()
                return
            doc = self.update(uri, version, analysis=result, analysis_version=version, failure=None)
            if doc is None:
                return  # a stale result is never published
            self.publish(doc)
            done.set()
            self.refresh()
            jobs = self.jobs.get(uri)
            if jobs is not None:
                jobs.background = asyncio.create_task(self._background(uri, version))
        finally:
            doc = self.documents.get(uri)
            if doc is None or doc.current(version):
                done.set()

    def _publish_if(self, doc: Document | None) -> None:
        if doc is not None:
            self.publish(doc)

    def _publish_syntax_error(self, doc: Document) -> None:
        """Text that does not parse is never sent to the worker: its syntax error is found here."""
        line, message = syntax_problem(doc.text) or (1, "syntax error")
        diagnostic = Diagnostic(message=message, code="syntax", severity="error", line=line)
        analysis = AnalysisResult(diagnostics=(diagnostic,))
        self._publish_if(
            self.update(doc.uri, doc.version, analysis=analysis, analysis_version=doc.version, failure=None)
        )
        self.refresh()

    async def _background(self, uri: str, version: int) -> None:
        """Extra targets for hover, then the full lowering for the code lens summary, once idle."""
        await asyncio.sleep(self.options.background_delay_ms / 1000)
        doc = self.documents.get(uri)
        if doc is None or not doc.current(version):
            return
        ascend = dialect_of_source(doc.text) == "ascend"
        extra = [t for t in self.options.extra_targets if (t == "ascend") == ascend]
        primary = {k.target for k in doc.analysis.kernels} if doc.analysis is not None else set()
        timeout = self.options.analysis_timeout_s
        for target in extra:
            if target in primary and len(primary) == 1:
                continue
            try:
                result = await self.worker.request(
                    self._analysis_request(doc, target=target, race_check=False), timeout=timeout
                )
                entry = ExtraTarget(target, result)
            except (WorkerError, RequestFailed, RequestCancelled) as error:
                entry = ExtraTarget(target, None, str(error))
            latest = self.documents.get(uri)
            if latest is None or not latest.current(version):
                return
            earlier = latest.extra if latest.extra_version == version else ()
            self.update(uri, version, extra=(*earlier, entry), extra_version=version)
        if not self.options.summary:
            return
        try:
            summary = await self.worker.request(self._analysis_request(doc, full=True), timeout=timeout)
        except (WorkerError, RequestFailed, RequestCancelled):
            return
        updated = self.update(uri, version, summary=summary, summary_version=version)
        if updated is None:
            return
        self.publish(updated)
        self.refresh_code_lenses()
        if self.options.machine_code:
            await self._compile_machine_code(uri, version, summary)

    async def _compile_machine_code(self, uri: str, version: int, summary: AnalysisResult) -> None:
        """Compile each CUDA kernel of the full lowering with nvcc, in a job of its own, for the
        code lens; the job is killed with this task when the document changes."""
        known = tuple(
            CompiledKernel(kernel=k.name, error=k.machine_code_error)
            for k in summary.kernels
            if k.machine_code_error is not None
        )
        jobs = [CompileJob(k.name, k.machine_code) for k in summary.kernels if k.machine_code is not None]
        if self.update(uri, version, machine=known, machine_version=version) is None or not jobs:
            return
        async for compiled in compile_kernels(jobs):
            doc = self.documents.get(uri)
            if doc is None or not doc.current(version):
                return
            self.update(uri, version, machine=(*doc.machine, compiled))
            self.refresh_code_lenses()

    def hints_refresh(self) -> bool:
        """Whether the client declared ``workspace.inlayHint.refreshSupport``: it can be told when
        compiled facts arrive, so a hint request never waits for them."""
        workspace = self.client_capabilities.workspace
        return bool(workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support)

    def lenses_refresh(self) -> bool:
        """Whether the client declared ``workspace.codeLens.refreshSupport``."""
        workspace = self.client_capabilities.workspace
        return bool(workspace and workspace.code_lens and workspace.code_lens.refresh_support)

    def refresh(self) -> None:
        """Ask the client to ask again for hints and lenses (when it supports refresh)."""
        if self.hints_refresh():
            self.workspace_inlay_hint_refresh(None)
        self.refresh_code_lenses()

    def refresh_code_lenses(self) -> None:
        """Ask the client for lenses again, if it supports that (the summary came in)."""
        if self.lenses_refresh():
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

    def publish(self, doc: Document) -> None:
        """Publish the diagnostics of the snapshot's version (nothing from older versions)."""
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=doc.uri, version=doc.version, diagnostics=document_diagnostics(doc)
            )
        )

    async def analyzed(self, uri: str, *, wait: bool = True) -> Document | None:
        """The document once its current version's analysis is in (waiting up to ``hint_wait_s``,
        only when ``wait``), as it stands then; ``None`` when it is not open.

        Requests whose client can be asked to refresh pass ``wait=False`` and answer from what is
        known now: a request never queues behind the worker.
        """
        jobs = self.jobs.get(uri)
        if wait and jobs is not None and self.options.trusted and uri in self.documents:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(jobs.done.wait(), self.options.hint_wait_s)
        return self.documents.get(uri)

    def analyzing(self, uri: str) -> bool:
        """Whether the analysis of the document's current version is still to come."""
        jobs = self.jobs.get(uri)
        return jobs is not None and not jobs.done.is_set()

    def shutdown_jobs(self) -> None:
        """Stop every document's analysis (and the nvcc jobs under it)."""
        for jobs in self.jobs.values():
            jobs.cancel()
