"""The arguments and target a kernel is analyzed with, and where each came from: a directive,
a call site, a recorded spec, defaults, and ``[tool.tilelang-lsp]`` in pyproject.toml."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.lowering.resolve.source import CallSite, KernelSource
from irtrace.targets.backends import ASCEND, known_target_name
from irtrace.targets.specs import DtypeName

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class ArgumentChoice:
    """The arguments a kernel is analyzed with and where each came from."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    origin: str
    """``directive (line 7)``, ``call site (line 44)`` or ``parameter defaults``."""
    from_project: tuple[str, ...] = ()
    """Parameters filled from ``[tool.tilelang-lsp]`` in pyproject.toml."""
    missing: tuple[str, ...] = ()
    """Required parameters nobody gave a value for (an ``@autotune`` config may still fill them)."""
    symbolic: tuple[str, ...] = ()
    """``T.const`` sizes nobody gave a value for: analyzed as symbolic sizes."""


@dataclass(frozen=True)
class ProjectConfig:
    """``[tool.tilelang-lsp]`` of the nearest ``pyproject.toml``."""

    path: str | None = None
    target: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    """Values for any kernel's parameters of that name (``M = 1024``)."""
    kernel_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per kernel: ``[tool.tilelang-lsp.kernels.matmul] M = 1024``."""


def resolve_arguments(
    kernel: KernelSource,
    project: ProjectConfig,
    recorded: CallSite | None = None,
    instance: CallSite | None = None,
    unknown: tuple[str, ...] = (),
) -> ArgumentChoice:
    """Directive, else ``instance`` (one a program really made: recorded, or its entry point's),
    else a call site, else ``recorded`` (the kernel's spec in an ``irtrace.toml``), else parameter
    defaults; pyproject fills what is left, except the ``unknown`` parameters of ``instance`` (the
    program passed something that cannot be made here: shown as unknown, never filled).

    An eager kernel's tensor parameters need no value; its ``T.const`` sizes are filled like
    required parameters, and those still without a value are analyzed as symbolic sizes.
    """
    if kernel.directive is not None and kernel.directive.has_args:
        args, kwargs = kernel.directive.args, dict(kernel.directive.kwargs)
        origin = f"directive (line {kernel.directive.line})"
        if kernel.eager and args:
            # an eager kernel's tensors take no value: positional values go to the others, in order
            takers = [p for p in kernel.params if p not in kernel.tensor_params]
            kwargs = {**dict(zip(takers, args, strict=False)), **kwargs}
            args = ()
    elif instance is not None:
        args, kwargs = instance.args, dict(instance.kwargs)
        origin = instance.origin or "a recorded call"
    elif kernel.call_site is not None:
        args, kwargs = kernel.call_site.args, dict(kernel.call_site.kwargs)
        origin = f"call at line {kernel.call_site.line}"
    elif recorded is not None:
        args, kwargs = recorded.args, dict(recorded.kwargs)
        origin = recorded.origin or "a recorded call"
    else:
        args, kwargs, origin = (), {}, "defaults"
    given = set(kernel.params[: len(args)]) | set(kwargs)
    configured = {**project.args, **project.kernel_args.get(kernel.name, {})}
    filled = []
    missing: list[str] = []
    symbolic: list[str] = []
    for name in [*kernel.required, *(c for c in kernel.consts if c not in kernel.required)]:
        if name in given:
            continue
        if instance is not None and name in unknown:
            (symbolic if name in kernel.consts else missing).append(name)
        elif name in configured:
            kwargs[name] = _config_value(configured[name])
            filled.append(name)
        elif name in kernel.consts:
            symbolic.append(name)
        else:
            missing.append(name)
    return ArgumentChoice(args, kwargs, origin, tuple(filled), tuple(missing), tuple(symbolic))


def _config_value(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("T.") and value[2:].isidentifier():
        return DtypeName(value[2:])
    if isinstance(value, list):
        return [_config_value(v) for v in value]
    return value


def resolve_target(
    kernel: KernelSource | None, dialect: str, default: str, project: ProjectConfig
) -> tuple[str, str]:
    """The target name and where it came from: directive, decorator/compile call, config, default.

    ``kernel`` is ``None`` for a module-level PrimFunc (no function around it to read).
    """
    if dialect == ASCEND:
        return "ascend", "Ascend dialect"
    if kernel is not None and kernel.directive is not None and kernel.directive.target:
        return kernel.directive.target, f"directive (line {kernel.directive.line})"
    if kernel is not None and kernel.decorator_target:
        return kernel.decorator_target, "@tilelang.jit(target=...)"
    if kernel is not None and kernel.call_site is not None and kernel.call_site.target:
        return kernel.call_site.target, f"compile call (line {kernel.call_site.line})"
    if project.target and known_target_name(project.target):
        return str(known_target_name(project.target)), f"{project.path} [tool.tilelang-lsp]"
    return default, "default target"


def read_project_config(document: str | Path, root: str | Path | None = None) -> ProjectConfig:
    """``[tool.tilelang-lsp]`` from the nearest ``pyproject.toml`` above ``document``, up to
    ``root`` when given (an MCP server's allowed root: no file above it is read)."""
    folder = Path(document).resolve().parent
    folders = [folder, *folder.parents]
    if root is not None:
        top = Path(root).resolve()
        folders = [f for f in folders if f.is_relative_to(top)]
    for candidate in folders:
        path = candidate / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return ProjectConfig(path=str(path))
        table = data.get("tool", {}).get("tilelang-lsp", {})
        if not isinstance(table, dict):
            return ProjectConfig(path=str(path))
        args = table.get("args", {})
        kernels = table.get("kernels", {})
        return ProjectConfig(
            path=str(path),
            target=table.get("target") if isinstance(table.get("target"), str) else None,
            args=dict(args) if isinstance(args, dict) else {},
            kernel_args={k: dict(v) for k, v in kernels.items() if isinstance(v, dict)}
            if isinstance(kernels, dict)
            else {},
        )
    return ProjectConfig()
