"""The messages between a server and its long-lived worker process, defined once for both servers.

The language server and the MCP server each run a worker (the user's interpreter, with tilelang
imported) and speak to it the same way: one JSON object per line, encoded and decoded with msgspec.
The server sends a ``Call`` (a typed ``Request`` under an id) or a ``Cancel``; the worker answers
each call with a ``Result`` or a ``Failure`` and reports ``Ready``, ``Warm`` and ``Progress``
events. Each server defines its own ``Request`` subtypes (one per method, ``tag`` naming it) and
decodes calls with a ``WorkerCodec`` of their union. A result's body stays raw until the caller
decodes it with the type its request names (``answer``), so a malformed answer fails that one
request with a message naming the field, never the reader. Pure msgspec: no tilelang.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Generic, TypeVar

import msgspec


class Request(msgspec.Struct, frozen=True, kw_only=True, tag_field="method", forbid_unknown_fields=True):
    """One thing a worker is asked to do; a subtype per method, its ``tag`` the method's name.
    Unknown fields are refused: a caller's typo or an injected option is an error, never ignored."""

    answer: ClassVar[Any]
    """The type of the worker's answer (a ``msgspec.Struct``, or ``dict[str, Any]`` for JSON)."""


R = TypeVar("R", bound=Request)


class Call(msgspec.Struct, Generic[R], frozen=True, tag="call", tag_field="kind", forbid_unknown_fields=True):
    id: int
    request: R


class Cancel(msgspec.Struct, frozen=True, tag="cancel", tag_field="kind", forbid_unknown_fields=True):
    """Stop call ``id`` after the step it is in."""

    id: int


# --- answers and events (worker to server) -----------------------------------------------------


class Ready(msgspec.Struct, frozen=True, kw_only=True, tag="ready", tag_field="kind"):
    """tilelang is imported: the worker takes requests."""

    pid: int
    import_s: float
    prefix: str
    """The worker's ``sys.prefix`` (its environment)."""
    tilelang: str
    """The folder tilelang was imported from."""
    tilelang_version: str | None = None


class Warm(msgspec.Struct, frozen=True, kw_only=True, tag="warm", tag_field="kind"):
    """The warm-up lowering is done."""

    warmup_s: float


class Progress(msgspec.Struct, frozen=True, kw_only=True, tag="progress", tag_field="kind"):
    """Call ``request`` starts building the kernel ``kernel`` (defined at ``line``)."""

    request: int
    kernel: str
    line: int


class Result(msgspec.Struct, frozen=True, kw_only=True, tag="result", tag_field="kind"):
    id: int
    body: msgspec.Raw
    """The request's ``answer`` type, decoded by the caller."""
    rss_mb: float


class Failure(msgspec.Struct, frozen=True, kw_only=True, tag="failure", tag_field="kind"):
    id: int
    error: str
    cancelled: bool = False
    """Stopped by a ``Cancel``, not failed."""
    rss_mb: float | None = None


FromWorker = Ready | Warm | Progress | Result | Failure

# --- encoding ----------------------------------------------------------------------------------


class ProtocolError(Exception):
    """A message that does not follow the protocol; the text says which field and why."""


T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_from_worker: msgspec.json.Decoder[Ready | Warm | Progress | Result | Failure] = msgspec.json.Decoder(
    FromWorker
)


def encode(message: msgspec.Struct) -> bytes:
    """One protocol line, newline included."""
    return _encoder.encode(message) + b"\n"


def raw(value: Any) -> msgspec.Raw:
    """A result body for ``Result``."""
    return msgspec.Raw(_encoder.encode(value))


class WorkerCodec(Generic[R]):
    """Decodes what a server sends its worker: calls of the requests in ``requests`` (a union of
    ``Request`` subtypes), and cancels."""

    def __init__(self, requests: Any) -> None:
        self.requests = requests
        self._to_worker: msgspec.json.Decoder[Call[R] | Cancel] = msgspec.json.Decoder(
            Call[requests] | Cancel  # type: ignore[valid-type]
        )

    def decode_to_worker(self, line: bytes | str) -> Call[R] | Cancel:
        try:
            return self._to_worker.decode(line)
        except msgspec.DecodeError as error:
            raise ProtocolError(f"malformed request: {error}") from None


def decode_from_worker(line: bytes | str) -> Ready | Warm | Progress | Result | Failure:
    try:
        return _from_worker.decode(line)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"malformed worker message: {error}") from None


def decode_body(body: msgspec.Raw | bytes, kind: type[T], method: str) -> T:
    """A ``Result``'s body as ``kind``, the type its request named."""
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError as error:
        raise ProtocolError(f"malformed answer to {method}: {error}") from None


def resident_mb() -> float:
    """The worker's resident memory now, in MiB, as its ``Result`` and ``Failure`` report it."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def method_of(request: Request) -> str:
    """The method a request names on the wire (its ``tag``)."""
    return str(type(request).__struct_config__.tag)


class Envelope(msgspec.Struct):
    """Only the id of a message that failed to decode, to answer it with the reason."""

    id: int | None = None


def message_id(line: bytes | str) -> int | None:
    """The ``id`` of a malformed message, when it has a readable one."""
    try:
        return msgspec.json.decode(line, type=Envelope).id
    except msgspec.DecodeError:
        return None
