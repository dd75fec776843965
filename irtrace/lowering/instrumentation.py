"""TileLang's instrumentation API, or the same events on a release without it (0.1.13).

The version range itself is ``irtrace.targets.compat``'s; this half imports TileLang, so it lives in
the recording layer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from irtrace.targets.compat import (
    INSTRUMENTATION_SINCE,
    UnsupportedTileLang,
    installed_tilelang,
    require_supported_tilelang,
)


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
