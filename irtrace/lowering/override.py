"""``--override KERNEL=path.cu``: compile the user's edited device source in place of TileLang's.

TileLang's CUDA and HIP code generators hand the code they generated to the TVM global
``tilelang_callback_cuda_postproc`` (``tilelang_callback_hip_postproc``) and compile whatever it
returns; ``tilelang.engine.register_cuda_postproc`` is the public way to set it. We register one
that returns the override's text for the named kernel, and leaves any other kernel as it was
(or as an earlier callback made it). The kernel source a run records is what was compiled, so
it is the override's; a nested ``override`` stage, whose IR before is TileLang's generated
source and after is the file, says that it was replaced and by which text (its SHA-256).

A compilation outside irtrace's recorder (``--bench`` compiling the kernel again to run it)
gets the override when TileLang generates the very text it replaced for the kernel before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.base.errors import InputError, NotInTraceError, UsageError
from irtrace.lowering.instrumentation import require_instrumentation
from irtrace.trace.model import text_sha256
from irtrace.trace.schema import PassRecord

OVERRIDE_STAGE = "override"
"""The stage recorded inside ``codegen`` when a kernel's generated source was replaced."""
POSTPROC_CALLBACKS = {
    "cuda": "tilelang_callback_cuda_postproc",
    "hip": "tilelang_callback_hip_postproc",
}
"""The backends whose generated source an override can replace, and TileLang's hook for each."""


@dataclass(frozen=True)
class SourceOverride:
    """One ``--override KERNEL=path``: the kernel's name as irtrace records it, and the file's text."""

    kernel: str
    path: str
    text: str

    @property
    def sha256(self) -> str:
        return text_sha256(self.text)


def parse_overrides(items: Sequence[str]) -> dict[str, SourceOverride]:
    """``KERNEL=path`` items, each file read now: a bad item or file fails before anything runs."""
    overrides: dict[str, SourceOverride] = {}
    for item in items:
        kernel, equals, path = item.partition("=")
        kernel, path = kernel.strip(), path.strip()
        if not equals or not kernel or not path:
            raise UsageError(f"--override {item!r}: write KERNEL=path (e.g. gemm=edited.cu)")
        if kernel in overrides:
            raise UsageError(f"--override names kernel {kernel!r} twice")
        overrides[kernel] = SourceOverride(kernel, path, _read_source(path))
    return overrides


def _read_source(path: str) -> str:
    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"--override: {path!r} is not a file")
    try:
        # newline="" keeps the bytes as written, so the recorded SHA-256 is the file's own
        with file.open(encoding="utf-8", newline="") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"--override: cannot read {path!r}: {error}") from None
    if not text.strip():
        raise InputError(f"--override: {path!r} is empty")
    return text


@dataclass
class OverrideSession:
    """The overrides in force, and which kernels they were applied to."""

    overrides: Mapping[str, SourceOverride]
    previous: dict[str, Any] = field(default_factory=dict)
    """Each hook's callback before ours (another tool's, such as TileLang's IKET), still called."""
    applied: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    """Kernels generated while the overrides were in force (named in the error for a typo)."""
    replaced: dict[str, str] = field(default_factory=dict)
    """SHA-256 of a generated source already replaced -> kernel: the same text is replaced again."""

    def postproc(self, backend: str) -> Callable[[str, Any], str]:
        """TileLang's postproc callback for ``backend``."""

        def callback(code: str, target: Any) -> str:
            previous = self.previous.get(backend)
            generated = str(previous(code, target)) if previous is not None else code
            return self.replace(generated)

        return callback

    def replace(self, generated: str) -> str:
        recorder = _current_recorder()
        kernel = _recorded_kernel(recorder) if recorder is not None else None
        if kernel is not None:
            self.seen.add(kernel)
        if kernel not in self.overrides:
            kernel = self.replaced.get(text_sha256(generated))
        if kernel is None or kernel not in self.overrides:
            return generated
        override = self.overrides[kernel]
        self.applied.add(kernel)
        self.replaced[text_sha256(generated)] = kernel
        if recorder is not None:
            _record_stage(recorder, generated, override)
        return override.text

    def check_applied(self) -> None:
        """Raise ``NotInTraceError`` for an override whose kernel was never compiled."""
        missing = [name for name in self.overrides if name not in self.applied]
        if not missing:
            return
        lowered = ", ".join(sorted(self.seen)) or "none"
        raise NotInTraceError(
            f"--override {missing[0]}: no CUDA or HIP kernel of that name was generated "
            f"(kernels generated: {lowered}); the trace was written without the override"
        )


@contextmanager
def overriding(overrides: Mapping[str, SourceOverride]) -> Iterator[OverrideSession]:
    """Replace the named kernels' generated source while the block runs (nothing if none)."""
    session = OverrideSession(overrides)
    if not overrides:
        yield session
        return
    require_instrumentation("--override")  # the recorder of each compilation names its kernel
    import tvm_ffi

    for backend, name in POSTPROC_CALLBACKS.items():
        previous = tvm_ffi.get_global_func(name, allow_missing=True)
        if previous is not None:
            session.previous[backend] = previous
        tvm_ffi.register_global_func(name, f=session.postproc(backend), override=True)
    try:
        yield session
    finally:
        for backend, name in POSTPROC_CALLBACKS.items():
            if backend in session.previous:
                tvm_ffi.register_global_func(name, f=session.previous[backend], override=True)
            else:
                tvm_ffi.remove_global_func(name)


def _current_recorder() -> Any:
    """irtrace's recorder of the compilation now generating code, if it is one of ours."""
    from tilelang.instrumentation import current_compile_pass_instrumentation

    from irtrace.lowering.recorder import PassRecorder

    session = current_compile_pass_instrumentation()
    return session.find_tool(PassRecorder) if session is not None else None


def _recorded_kernel(recorder: Any) -> str | None:
    """The kernel name of the recorder's run, as the trace will show it."""
    if recorder.run_id is None:
        return None
    return str(recorder.writer.run(recorder.run_id).kernel)


def _record_stage(recorder: Any, generated: str, override: SourceOverride) -> None:
    """Add the ``override`` stage inside the open ``codegen`` stage of the recorder's run.

    The recorder numbers passes as they start; the stage takes the next number, as a pass nested
    in codegen would, and is written through the recorder's own queue, after the texts before it.
    """
    parent = recorder.open[-1] if recorder.open else None
    index = recorder.next_index
    recorder.next_index += 1
    run_id, writer = recorder.run_id, recorder.writer
    start_s = time.perf_counter() - recorder.t0

    def write() -> None:
        record = PassRecord(
            index=index,
            name=OVERRIDE_STAGE,
            raw_name=f"--override {Path(override.path).name}",
            phase="codegen",
            pipeline=None,
            depth=parent.depth + 1 if parent is not None else 0,
            parent=parent.index if parent is not None else None,
            start_s=start_s,
            wall_s=0.0,
            self_s=0.0,
            changed=generated != override.text,
            ir_before=writer.add_text(generated),
            ir_after=writer.add_text(override.text),
            scope="device",
        )
        writer.add_pass(run_id, record)

    recorder.printer.write(write)
