"""What every tool call shares: the server's limits and roots, the worker that runs jobs, and the
traces this session recorded. A tool module gets one ``Session`` as its ``context``."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from irtrace.trace.instances import instance_trace_files
from tilelang_mcp import backend
from tilelang_mcp.protocol import Job, Record, Recorded, make_job
from tilelang_mcp.roots import AllowedRoots
from tilelang_mcp.worker_client import WorkerClient


class ToolError(Exception):
    """A call that cannot be answered; its message, for the agent, is the tool error."""


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
    document: str
    """Its resource's JSON, ``trace://t1``: its runs in brief and its file."""


async def _nobody_listens() -> None:
    return None


class Session:
    """The state tool calls share: config, worker, recorded traces; and the steps they share
    (checking a spec against the roots, running a job, recording and loading traces)."""

    def __init__(self, config: ServerConfig, worker: WorkerClient | None = None) -> None:
        self.config = config
        if worker is None:
            scratch = config.store / "scratch"
            scratch.mkdir(parents=True, exist_ok=True)
            worker = WorkerClient(scratch=scratch)
        self.worker = worker
        self.traces: dict[str, StoredTrace] = {}
        self.recorded = 0
        self.resources_changed: Callable[[], Awaitable[None]] = _nobody_listens
        """Tells the client the resource list changed (the server sets it)."""

    def kernel_spec(self, text: str) -> str:
        """The spec with its file checked against the roots and made absolute. A kernel named
        without arguments gets its instance in the job, from the resolver the language server uses
        (docs/lsp.md, "Which kernel, which arguments, which target")."""
        file = self.config.roots.check(backend.spec_file(text), "kernel file")
        return backend.with_path(text, file)

    def timeout(self, asked: float | None) -> float:
        return min(asked, self.config.timeout_s) if asked else self.config.timeout_s

    async def job(self, kind: type[Job], spec: str, timeout_s: float | None, **fields: Any) -> Any:
        """Run a job of ``kind`` for the spec ``spec`` in the worker: its file checked against the
        roots, the instance sources of its root, this call's limits, and ``fields``, all through
        the job's schema (an unknown field or a bad value is a tool error naming it)."""
        checked = self.kernel_spec(spec)
        # a kernel named without arguments may take an instance recorded under its root
        # (``irtrace.jsonl``, ``.irtrace/*.jsonl``); no manifest above that root is read
        root = self.config.roots.root_of(Path(backend.spec_file(checked)))
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
        what = f"{spec} on {', '.join(names)}"
        self.traces[trace_id] = StoredTrace(
            trace_id, path, what, self.resource_document(trace_id, path, what, trace)
        )
        await self.resources_changed()
        return trace_id, trace, answer

    @staticmethod
    def resource_document(trace_id: str, path: Path, what: str, trace: backend.Trace) -> str:
        """The trace as a resource, ``trace://t1``: its runs in brief and its file."""
        data = {
            "trace": trace_id,
            "what": what,
            "file": str(path),
            "runs": [backend.run_summary(trace, run) for run in trace.runs],
        }
        return backend.dump(data)

    async def load_file(self, path: Path) -> backend.Trace:
        """A trace file read by a child process under the job limits (``load_trace_bounded``)."""
        limits = backend.JobLimits(self.config.timeout_s, self.config.memory_mb)
        return await anyio.to_thread.run_sync(backend.load_trace_bounded, path, limits, self.config.store)

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

    @staticmethod
    def target(target: str | None) -> str | None:
        """A target as irtrace names it; ``None`` is the kernel dialect's default."""
        return backend.canonical_targets([target])[0] if target else None
