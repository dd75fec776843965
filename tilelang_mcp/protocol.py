"""The MCP server's jobs for its worker, typed: one ``Request`` subtype per job, on the worker
protocol the language server speaks too (``irtrace.edge.worker_protocol``).

Every job names a kernel spec (already checked against the allowed roots by the server) and the
limits its forked child runs under. Unknown fields and values of the wrong type or range are
refused when the request is made and again when the worker decodes it, naming the field. Imports
no tilelang: the server process uses it.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from irtrace.edge.worker_protocol import Request, WorkerCodec

Seconds = Annotated[float, msgspec.Meta(gt=0)]
Megabytes = Annotated[int, msgspec.Meta(gt=0)]
Line = Annotated[int, msgspec.Meta(ge=1)]


class Job(Request, frozen=True, kw_only=True):
    """A job the worker runs in a child forked for it, killed past ``timeout_s``, its memory
    capped ``memory_mb`` above what the worker holds."""

    answer: ClassVar[Any] = dict[str, Any]
    spec: str
    """``path.py[::name[(args)]]``, its file checked against the allowed roots and absolute."""
    timeout_s: Seconds
    memory_mb: Megabytes
    instance_traces: tuple[str, ...] = ()
    """Traces whose recorded instances a kernel named without arguments may take."""
    manifest_root: str | None = None
    """The allowed root the file is under: no manifest above it is read."""


class RunInstance(msgspec.Struct, frozen=True, kw_only=True):
    """The instance one run of a ``Record`` job was lowered with, in the resolver's words."""

    kernel: str
    target: str
    call: str
    """The call lowered, ``matmul(1024, 1024, 1024, block_M=128)``."""
    origin: str
    """Where its arguments came from: ``__main__``, ``the spec``, ``defaults``, a directive, ..."""
    symbolic: tuple[str, ...] = ()
    autotune: dict[str, str] = {}
    from_project: tuple[str, ...] = ()
    instances: tuple[str, ...] = ()


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``Record`` job wrote: its trace file, its runs, and the instance of each."""

    output: str
    runs: int
    stopped: str | None = None
    """Why the job stopped early (its child was killed), ``None`` when it finished."""
    instances: tuple[RunInstance, ...] = ()


class Record(Job, frozen=True, kw_only=True, tag="record"):
    """Lower the spec for ``targets`` into the trace file ``output`` (``irtrace record``)."""

    answer = Recorded
    output: str
    targets: tuple[str, ...] = ()
    pass_configs: dict[str, Any] = {}  # noqa: RUF012 (msgspec copies an empty default)
    machine_code: bool = False
    bench: bool = False
    source_map: bool = False
    """Store source maps (``source_line_ir``)."""


class Facts(Job, frozen=True, kw_only=True, tag="facts"):
    """Each kernel of the spec up to layout inference: its buffers (those on ``line`` if given)."""

    target: str | None = None
    line: Line | None = None


class Diagnostics(Job, frozen=True, kw_only=True, tag="diagnostics"):
    """Errors and warnings of the frontend and pipeline for each kernel of the spec."""

    target: str | None = None


JobRequest = Record | Facts | Diagnostics
CODEC: WorkerCodec[JobRequest] = WorkerCodec(JobRequest)


class InvalidJob(ValueError):
    """A job's fields that do not follow its schema; the message names the field."""


def make_job(kind: type[Job], **fields: Any) -> Any:
    """``kind`` made from ``fields`` through its schema (constructing a struct checks nothing):
    an unknown field, or a value of the wrong type or range, raises ``InvalidJob``."""
    try:
        return msgspec.convert(fields, type=kind)
    except msgspec.ValidationError as error:
        raise InvalidJob(f"invalid {kind.__struct_config__.tag} request: {error}") from None
