"""Which TileLang releases irtrace works with, and where those releases differ.

TileLang moves its APIs between releases; this is the one place that knows how. What differs
within the range (tested by ``make test-versions``, one environment per release):

- 0.1.13 has no ``tilelang.instrumentation`` (0.1.14 added it): no pass pairing, no pipeline
  phase, no codegen hook. ``stacked_pass_instrument`` and ``compile_session`` give the recorder
  the same events there (TVM's instrument hooks, plus two wrappers where 0.1.14 calls its hooks);
  ``irtrace run``, which needs TileLang to attach tools to compilations it starts itself, says
  in one line that it needs 0.1.14 (``require_instrumentation``).
- 0.1.13 and 0.1.14 have no Ascend backend (``tilelang.ascend``, the ``ascend`` target kind came
  in 0.1.15); ``backend_unavailable`` says so instead of TileLang's ``AssertionError``.
- ``determine_target``, ``tvm.tirx`` and the ``JITImpl``/``AutoTuneImpl`` internals the loader
  reads are the same in all three; pass names differ only where the pipelines differ
  (docs/passdiff.md: what changed in 0.1.15).

Outside the range, a release is refused with one line (``UnsupportedTileLang``): 0.1.12 and
older are untested, and so is a newer release until it is; set
``TILELANG_DEVTOOLS_ANY_TILELANG=1`` to try one anyway.

This module imports no tilelang: the installed release is read from the package metadata.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from irtrace.core.errors import ExitCode, IrtraceError

OLDEST = (0, 1, 13)
"""The oldest supported release."""
BEYOND = (0, 1, 16)
"""The first release not yet supported."""
SUPPORTED = ">=0.1.13,<0.1.16"
"""The range, as pyproject.toml's requirement writes it."""
ANY_TILELANG_ENV = "TILELANG_DEVTOOLS_ANY_TILELANG"
"""Set to 1 to run with a release outside the range, at one's own risk."""

BACKEND_SINCE: dict[str, tuple[int, int, int]] = {"ascend": (0, 1, 15)}
INSTRUMENTATION_SINCE = (0, 1, 14)
"""The first release with ``tilelang.instrumentation``."""
"""Backends that only some releases of the range have, and the first release with each."""


class UnsupportedTileLang(IrtraceError):
    """The installed TileLang is not a release this version of tilelang-devtools supports."""

    exit_code = ExitCode.ENVIRONMENT


def release(version: str) -> tuple[int, int, int] | None:
    """``(0, 1, 15)`` for ``0.1.15``, ``0.1.15.post1`` or ``0.1.15+cu128``; ``None`` if unreadable."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version.strip())
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def installed_tilelang() -> str | None:
    """The installed TileLang's version, from its package metadata (no import); ``None`` if absent."""
    try:
        return importlib.metadata.version("tilelang")
    except importlib.metadata.PackageNotFoundError:
        return None


def unsupported_reason(version: str | None) -> str | None:
    """The one line that says why ``version`` cannot be used, or ``None`` when it can."""
    if version is None:
        return f"tilelang is not installed; install a supported release: pip install 'tilelang{SUPPORTED}'"
    found = release(version)
    if found is not None and OLDEST <= found < BEYOND:
        return None
    if os.environ.get(ANY_TILELANG_ENV) == "1":
        return None
    return (
        f"tilelang {version} is installed, but tilelang-devtools supports tilelang{SUPPORTED}; "
        f"pip install 'tilelang{SUPPORTED}' (or set {ANY_TILELANG_ENV}=1 to try it anyway)"
    )


@cache
def _checked(version: str | None) -> str | None:
    return unsupported_reason(version)


def require_supported_tilelang() -> None:
    """Raise ``UnsupportedTileLang`` unless the installed TileLang is in the supported range.

    Called before the first use of TileLang's API (making a target, hooking a script), so an
    unsupported release fails with one line instead of an ``ImportError`` deep in a lowering.
    """
    reason = _checked(installed_tilelang())
    if reason is not None:
        raise UnsupportedTileLang(reason)


def backend_unavailable(backend: str, version: str | None = None) -> str | None:
    """Why the installed TileLang (or ``version``) cannot lower for ``backend``; ``None`` if it can."""
    since = BACKEND_SINCE.get(backend)
    version = version if version is not None else installed_tilelang()
    found = release(version) if version is not None else None
    if since is None or found is None or found >= since:
        return None
    needed = ".".join(map(str, since))
    return f"the {backend} target needs tilelang>={needed}; tilelang {version} is installed"


def require_supported_backend(backend: str) -> None:
    """``require_supported_tilelang``, and raise ``UnsupportedTileLang`` if its release lacks ``backend``."""
    require_supported_tilelang()
    reason = backend_unavailable(backend)
    if reason is not None:
        raise UnsupportedTileLang(reason)


def require_instrumentation(feature: str) -> None:
    """``require_supported_tilelang``, and raise ``UnsupportedTileLang`` if ``feature`` (a command)
    needs TileLang's instrumentation API and the installed release has none."""
    require_supported_tilelang()
    if not has_instrumentation():
        needed = ".".join(map(str, INSTRUMENTATION_SINCE))
        raise UnsupportedTileLang(
            f"{feature} needs tilelang>={needed} (tilelang.instrumentation); "
            f"tilelang {installed_tilelang()} is installed"
        )


# --- TileLang's instrumentation API, or the same hooks for a release without it ----------------
#
# The recorder is a TileLang ``PassInstrumentationTool``: 0.1.14 added ``tilelang.instrumentation``,
# which pairs TVM's pass callbacks (``StackedPassInstrument``), names the backend pipeline a pass
# runs in (``pass_pipeline``) and hands each codegen call to the tools (``run_codegen``). The
# functions below use it where it exists; ``_HOOKS_WITHOUT_INSTRUMENTATION`` is the fallback that
# gives the same events through TVM's own instrument hooks and two wrappers at the points where
# 0.1.14 calls its hooks (``PassPipeline.lower``, ``DeviceCodegen.lower``).


def has_instrumentation() -> bool:
    """Whether the installed TileLang has ``tilelang.instrumentation`` (0.1.14 and later)."""
    import importlib.util

    return importlib.util.find_spec("tilelang.instrumentation") is not None


def stacked_pass_instrument(observer: Any) -> Any:
    """A TVM pass instrument pairing each pass's before/after callbacks for ``observer`` (a
    TileLang ``PassEventObserver``): TileLang's own, or ``PairedPasses`` without it."""
    if has_instrumentation():
        from tilelang.instrumentation import StackedPassInstrument

        return StackedPassInstrument(observer, capture_nested=True)
    return _paired_passes_class()(observer)


@contextmanager
def compile_session(name: str, tools: Sequence[Any]) -> Iterator[None]:
    """One compilation whose pipelines and codegen calls are reported to ``tools`` (TileLang
    ``PassInstrumentationTool``s: ``pipeline_scope``, ``run_codegen``), and to no other tool."""
    if has_instrumentation():
        from tilelang.instrumentation import compile_pass_instrumentation

        with compile_pass_instrumentation(
            name=name, tools=list(tools), include_default_tools=False, reuse_existing=False
        ):
            yield
        return
    with _hooks_without_instrumentation(tools):
        yield


_PHASE: ContextVar[str | None] = ContextVar("irtrace_compat_pass_phase", default=None)
"""The pipeline phase (``pipeline_cuda``) while a backend pipeline runs, without TileLang's."""


@dataclass(frozen=True)
class PassEvent:
    """One pass as ``tilelang.instrumentation.PassEvent`` describes it (the fields the recorder reads)."""

    name: str
    sequence: int
    depth: int
    parent_sequence: int | None
    phase: str | None


@dataclass(frozen=True)
class IncompletePass:
    """A pass that started and never finished (``tilelang.instrumentation.IncompletePass``)."""

    name: str
    depth: int
    event: PassEvent | None
    state: Any


@dataclass(frozen=True)
class CodegenEvent:
    """One backend codegen call (``tilelang.instrumentation.CodegenEvent``)."""

    name: str
    mod: Any
    target: Any


@cache
def _paired_passes_class() -> type:
    """TileLang 0.1.14's ``StackedPassInstrument`` pairing, for releases without it: nested
    passes get depth and parent, and passes still open when a context exits are reported."""
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class PairedPasses:
        def __init__(self, observer: Any) -> None:
            self.observer = observer
            self.stack: list[tuple[str, int, PassEvent, Any]] = []
            self.next_sequence = 0

        def enter_pass_ctx(self) -> None:
            self.stack.clear()
            self.next_sequence = 0
            self.observer.enter_pass_context()

        def exit_pass_ctx(self) -> None:
            if self.stack:
                self.abort(None)
            self.observer.exit_pass_context()

        def run_before_pass(self, mod: Any, info: Any) -> None:
            name = str(info.name)
            parent = self.stack[-1][2].sequence if self.stack else None
            event = PassEvent(name, self.next_sequence, len(self.stack), parent, _PHASE.get())
            self.next_sequence += 1
            self.stack.append((name, event.depth, event, self.observer.pass_started(mod, event)))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            name = str(info.name)
            if not self.stack or self.stack[-1][0] != name:
                expected = self.stack[-1][0] if self.stack else None
                self.observer.callback_mismatch(name, expected)
                self.abort(RuntimeError(f"unmatched after-pass callback for {name!r}; expected {expected!r}"))
                return
            _, _, event, state = self.stack.pop()
            self.observer.pass_finished(mod, event, state)

        def abort(self, error: BaseException | None) -> None:
            incomplete = tuple(
                IncompletePass(name, depth, event, state) for name, depth, event, state in self.stack
            )
            self.stack.clear()
            if incomplete:
                self.observer.passes_incomplete(incomplete, error)

    return PairedPasses  # type: ignore[no-any-return]


def _codegen_name(build: Any, fallback: str) -> str:
    """The TVM global function a codegen entry calls (``target.build.tilelang_cuda_without_compile``),
    as 0.1.14's codegen events name it; it sits in the closure of TileLang's wrapper."""
    for cell in getattr(build, "__closure__", None) or ():
        if isinstance(cell.cell_contents, str) and cell.cell_contents.startswith("target.build."):
            return cell.cell_contents
    return fallback


@contextmanager
def _hooks_without_instrumentation(tools: Sequence[Any]) -> Iterator[None]:
    """While active, each backend pipeline runs inside the tools' ``pipeline_scope`` and each
    device codegen call goes through their ``run_codegen``, as in 0.1.14."""
    from tilelang.backend.device_codegen import DeviceCodegen
    from tilelang.backend.pass_pipeline.pipeline import PassPipeline

    pipeline_lower, codegen_lower = PassPipeline.lower, DeviceCodegen.lower

    def lower_pipeline(self: Any, mod: Any, target: Any) -> Any:
        phase = f"pipeline_{self.name}"
        token = _PHASE.set(phase)
        try:
            with ExitStack() as scopes:
                for tool in tools:
                    scopes.enter_context(tool.pipeline_scope(phase))
                return pipeline_lower(self, mod, target)
        finally:
            _PHASE.reset(token)

    def lower_codegen(self: Any, mod: Any, target: Any, *, compile_device: bool) -> Any:
        build = self.build if compile_device else self.build_without_compile
        event = CodegenEvent(_codegen_name(build, self.name), mod, target)

        def call() -> Any:
            return codegen_lower(self, mod, target, compile_device=compile_device)

        for tool in reversed(tools):
            call = functools.partial(tool.run_codegen, event, call)
        return call()

    PassPipeline.lower, DeviceCodegen.lower = lower_pipeline, lower_codegen  # type: ignore[method-assign]
    try:
        yield
    finally:
        PassPipeline.lower, DeviceCodegen.lower = pipeline_lower, codegen_lower  # type: ignore[method-assign]
