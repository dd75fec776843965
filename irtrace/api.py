"""Record kernel specs for targets into a trace: the one entry point the CLI and tools share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.errors import IrtraceError, KernelSourceError
from irtrace.loader import build_primfunc, load_kernel_module, select_kernels
from irtrace.recorder import RecordedLowering, record_failure, record_lowering
from irtrace.specs import KernelSpec
from irtrace.targets import make_tvm_target, resolve_targets
from irtrace.trace import KernelRun, TraceWriter


@dataclass(frozen=True)
class RecordRequest:
    """One kernel spec to record, with its targets and extra pass configs."""

    spec: KernelSpec
    targets: tuple[str, ...] = ()
    """Target names (``all`` allowed); empty means the dialect's default."""
    pass_configs: Mapping[str, Any] = field(default_factory=dict)
    """Added on top of the kernel's own (``--pass-config``)."""
    name: str | None = None
    """Name to record the kernel under instead of its Python name."""
    base_dir: Path | None = None
    """Folder that a relative spec path is relative to (a manifest's folder)."""


def record_request(
    request: RecordRequest,
    writer: TraceWriter,
    *,
    stop_after: Sequence[str] = (),
) -> list[RecordedLowering | KernelRun]:
    """Load, build and lower one request for each of its targets.

    A file that cannot be loaded raises (nothing to record); a kernel whose factory raises for
    one target, or that fails to lower, is recorded as a failed run and the others go on.
    """
    spec = request.spec
    path = Path(spec.path)
    if request.base_dir is not None and not path.is_absolute():
        path = request.base_dir / path
    loaded = load_kernel_module(path)
    kernels = select_kernels(loaded, spec)
    targets = resolve_targets(request.targets, loaded.dialect)
    results: list[RecordedLowering | KernelRun] = []
    for kernel in kernels:
        for target in targets:
            name = request.name or kernel.name
            spec_for_kernel = KernelSpec(spec.path, kernel.name, spec.args, spec.kwargs, spec.called)
            tvm_target = make_tvm_target(target)
            try:
                built = build_primfunc(kernel, spec_for_kernel, tvm_target, loaded.path)
            except KernelSourceError as error:
                results.append(
                    record_failure(
                        writer,
                        target,
                        kernel=name,
                        spec=spec_for_kernel.text,
                        args=spec.args_json(),
                        error=error.message,
                    )
                )
                continue
            configs = {**built.pass_configs, **request.pass_configs}
            results.append(
                record_lowering(
                    built.func,
                    target,
                    writer,
                    kernel=name,
                    spec=spec_for_kernel.text,
                    args=spec.args_json(),
                    pass_configs=configs,
                    tvm_target=tvm_target,
                    stop_after=stop_after,
                )
            )
    return results


def record_requests(
    requests: Iterable[RecordRequest], writer: TraceWriter
) -> tuple[list[KernelRun], list[IrtraceError]]:
    """Record every request; a request that cannot be loaded is reported and the rest go on."""
    runs: list[KernelRun] = []
    errors: list[IrtraceError] = []
    for request in requests:
        try:
            for result in record_request(request, writer):
                runs.append(result.run if isinstance(result, RecordedLowering) else result)
        except IrtraceError as error:
            errors.append(error)
    return runs, errors
