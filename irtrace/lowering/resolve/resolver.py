"""The one instance resolver: which arguments and target a kernel of a file is analyzed with, and
where each came from, in the same order and the same words for the language server and the MCP
server.

In order: a ``# tilelang: args(...)`` directive; instances recorded from real runs of the file
(``irtrace run``, ``IRTRACE=...``); the file's own entry point run through every kernel it builds
(``entry_point``); the literals of a call in the file; the kernel's spec in ``irtrace.toml``;
parameter defaults and ``[tool.tilelang-lsp]``; for ``@autotune`` the first config; and last,
parameters nobody gives are lowered as symbols (a size variable of the parameter's name, as
``T.dynamic`` gives), never as a guessed number. Runs in a trusted process that has loaded the
file (the language server's worker, an MCP job's child).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.base.errors import IrtraceError
from irtrace.base.toml_file import read_toml
from irtrace.lowering.loader import KernelDefinition, bind_call, describe_value, target_context
from irtrace.lowering.resolve.arguments import ProjectConfig, read_project_config, resolve_arguments
from irtrace.lowering.resolve.candidates import Candidate, InstanceSources, kernel_candidates
from irtrace.lowering.resolve.source import CallSite, KernelSource, scan_kernels
from irtrace.targets.specs import KernelSpec, format_value, parse_spec

NEEDS_VALUES = (
    "add a `# tilelang: args(...)` directive above it, or record a run of the program "
    "(`irtrace run -- python prog.py`, or IRTRACE=irtrace.jsonl)"
)
"""What gives a kernel the values its source does not: said wherever nothing is known."""


@dataclass(frozen=True)
class ResolvedInstance:
    """The instance a kernel is analyzed with and where each part of it came from."""

    spec: KernelSpec
    """Ready to build: given values, and a size variable of its name for each symbolic parameter."""
    origin: str
    """Where the arguments came from: ``directive (line 7)``, ``__main__``, a test id,
    ``call at line 44``, ``the spec in .../irtrace.toml``, ``defaults``, ``module-level PrimFunc``."""
    call: str
    """The call as shown: ``matmul(1024, 1024, 1024, block_M=64)``; symbols are listed apart."""
    shown: dict[str, str] = field(default_factory=dict)
    """Keyword arguments as written in ``call`` (symbols left out)."""
    from_project: tuple[str, ...] = ()
    """Parameters filled from ``[tool.tilelang-lsp]`` in pyproject.toml."""
    symbolic: tuple[str, ...] = ()
    """Parameters nobody gave a value for, lowered as symbols of their names."""
    unknown: tuple[str, ...] = ()
    """Parameters a real run passed something that cannot be made again here (shown as symbols)."""
    autotune: dict[str, str] = field(default_factory=dict)
    """Parameters taken from the first ``@autotune`` config, each value's ``repr``."""
    instances: tuple[str, ...] = ()
    """Labels of the real instances found (test ids, ``__main__``), for picking another."""
    error: str | None = None
    """Why no instance could be made (an ``@autotune`` configs function that raised)."""


def symbol(name: str) -> Any:
    """A size variable named ``name``: TileLang substitutes whatever a parameter is passed, so the
    buffers whose shapes use it show it, as a ``T.dynamic`` size would."""
    from tvm import tirx

    return tirx.Var(name, "int32")


def resolve_instance(
    kernel: KernelDefinition,
    source: KernelSource | None,
    file: Path,
    project: ProjectConfig,
    candidates: list[Candidate],
    *,
    pick: str | None = None,
    tvm_target: Any = None,
    manifest_root: str | None = None,
) -> ResolvedInstance:
    """The instance ``kernel`` is analyzed with (see the module's order); ``candidates`` are its
    real instances (``instance_candidates``), ``pick`` the label of the one the user chose."""
    if not kernel.kind.takes_arguments:
        return ResolvedInstance(KernelSpec(str(file), kernel.name), "module-level PrimFunc", kernel.name)
    chosen = next((c for c in candidates if c.label == pick), candidates[0] if candidates else None)
    labels = tuple(c.label for c in candidates)
    if source is None:  # not in the text the resolver scanned: its defaults only
        spec = KernelSpec(str(file), kernel.name, (), {}, called=True)
        return ResolvedInstance(spec, "defaults", f"{kernel.name}()", instances=labels)
    instance = (
        CallSite(0, chosen.args, dict(chosen.kwargs), origin=chosen.label) if chosen is not None else None
    )
    unknown = chosen.unknown if chosen is not None else ()
    manifest = manifest_call(file, kernel.name, Path(manifest_root) if manifest_root else None)
    choice = resolve_arguments(source, project, manifest, instance, unknown)
    args, kwargs = choice.args, dict(choice.kwargs)
    open_names = [*choice.missing, *choice.symbolic]
    autotune: dict[str, str] = {}
    error = None
    if kernel.kind.tunes:
        # what TileLang would tune over, the first config stands in for: the parameters left
        # out come from it (irtrace.lowering.loader.bind_call)
        partial = KernelSpec(str(file), kernel.name, args, kwargs, called=True)
        try:
            with target_context(tvm_target):
                bound = bind_call(kernel, partial, file)
        except IrtraceError as raised:
            if not choice.missing:  # else a configs function wanting the missing ones raised
                error = raised.message
        else:
            open_names = [name for name in open_names if name not in bound.autotune_defaults]
            autotune = {k: repr(describe_value(v)) for k, v in bound.autotune_defaults.items()}
    kwargs.update({name: symbol(name) for name in open_names})
    shown = {k: v for k, v in kwargs.items() if k not in open_names}
    words = [*(format_value(a) for a in args), *(f"{k}={format_value(v)}" for k, v in shown.items())]
    return ResolvedInstance(
        spec=KernelSpec(str(file), kernel.name, args, kwargs, called=True),
        origin=choice.origin,
        call=f"{kernel.name}({', '.join(words)})",
        shown={k: format_value(v) for k, v in shown.items()},
        from_project=tuple(choice.from_project),
        symbolic=tuple(open_names),
        unknown=tuple(unknown),
        autotune=autotune,
        instances=labels,
        error=error,
    )


def instance_candidates(
    file: Path, text: str, sources: list[KernelSource], where: InstanceSources, target: str
) -> dict[str, list[Candidate]]:
    """Per kernel without a directive: its recorded instances, then its entry point's first."""
    return kernel_candidates(file, text, sources, where, target)


def resolve_kernels(
    file: Path,
    text: str,
    kernels: list[KernelDefinition],
    where: InstanceSources,
    target: str,
    *,
    tvm_target: Any = None,
) -> dict[str, ResolvedInstance]:
    """Each of ``kernels`` (of the file ``file`` whose text is ``text``) resolved: what an MCP job
    calls for a kernel named without arguments, and the language server per kernel."""
    sources = {k.name: k for k in scan_kernels(text)}
    project = read_project_config(file, where.manifest_root)
    candidates = instance_candidates(file, text, list(sources.values()), where, target)
    return {
        kernel.name: resolve_instance(
            kernel,
            sources.get(kernel.name),
            file,
            project,
            candidates.get(kernel.name, []),
            pick=where.picks.get(kernel.name, where.pick),
            tvm_target=tvm_target,
            manifest_root=where.manifest_root,
        )
        for kernel in kernels
    }


MANIFEST = "irtrace.toml"


def manifest_call(file: Path, kernel: str, root: Path | None = None) -> CallSite | None:
    """The kernel's spec in the nearest ``irtrace.toml`` above ``file``, up to ``root`` (the
    arguments the project records it with; expressions allowed), or ``None``. A manifest that
    does not parse is ignored."""
    folder = file.resolve().parent
    folders = [folder, *folder.parents]
    if root is not None:
        top = root.resolve()
        folders = [f for f in folders if f.is_relative_to(top)]
    for candidate in folders:
        path = candidate / MANIFEST
        if not path.is_file():
            continue
        for spec in _manifest_specs(path):
            location = candidate / spec.path
            if spec.name == kernel and spec.called and location.resolve() == file.resolve():
                return CallSite(0, spec.args, dict(spec.kwargs), origin=f"the spec in {path}")
        return None
    return None


def _manifest_specs(path: Path) -> list[KernelSpec]:
    """The specs of a manifest's ``[[kernel]]`` tables (only those: the rest is ``irtrace record``'s
    business); none when it does not parse. Read here rather than through
    ``irtrace.lowering.manifest``, which builds record requests (``api``, which uses this module)."""
    try:
        tables = read_toml(path, "manifest").get("kernel", [])
    except IrtraceError:
        return []
    specs = []
    for table in tables if isinstance(tables, list) else []:
        text = table.get("spec") if isinstance(table, dict) else None
        if isinstance(text, str):
            try:
                specs.append(parse_spec(text))
            except IrtraceError:
                continue
    return specs


def describe(resolved: ResolvedInstance) -> Mapping[str, Any]:
    """The instance as JSON, for the MCP server's answers (the words hover uses)."""
    data: dict[str, Any] = {"call": resolved.call, "origin": resolved.origin}
    if resolved.symbolic:
        data["symbolic"] = list(resolved.symbolic)
    if resolved.autotune:
        data["autotune"] = dict(resolved.autotune)
    if resolved.from_project:
        data["from_project"] = list(resolved.from_project)
    if resolved.instances:
        data["instances"] = list(resolved.instances)
    return data
