"""Which instance of a kernel the worker analyzes: the program's own, when it can be known.

In order: a directive; instances recorded from real runs (traces written by ``irtrace run`` or
``IRTRACE=...``, matched to the kernel by its definition's file and line); the file's entry point
run up to its first compilation (``entry_point``); then the literals of a call in the same file
and parameter defaults (``irtrace.lowering.resolve.arguments``). A value the run could not describe is
unknown, never guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irtrace.lowering.resolve.source import KernelSource
from irtrace.targets.specs import DtypeName

MAIN_LABEL = "__main__"


@dataclass(frozen=True)
class Candidate:
    """One instance a kernel may be analyzed with, from a recorded run or the entry point."""

    label: str
    """What hover and the code lens call it: a test id, ``__main__``, ``pid 4242 at gemm.py:30``."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    """Parameters the run passed something that cannot be made again here (an object, a tensor
    to a non-tensor parameter)."""


class _Unknown:
    """A value the run passed that is not a literal, a dtype or a container of them."""


UNKNOWN = _Unknown()


def decode_value(value: Any) -> Any:
    """A recorded argument (JSON) back as a value: ``"T.float16"`` a dtype, ``{"unknown": ...}``
    and tensors (``{"shape", "dtype", "device"}``) ``UNKNOWN``, and a string that is the ``repr``
    of an object (``torch.float16``, ``<...>``) ``UNKNOWN``."""
    if isinstance(value, str):
        if value.startswith("T.") and value[2:].isidentifier():
            return DtypeName(value[2:])
        if value.startswith(("<", "torch.")):
            return UNKNOWN
        return value
    if isinstance(value, list):
        items = [decode_value(v) for v in value]
        return UNKNOWN if any(v is UNKNOWN for v in items) else items
    if isinstance(value, dict):
        return UNKNOWN
    return value


def _is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and "shape" in value and "dtype" in value


def candidate(label: str, source: KernelSource, call: dict[str, Any], constants: dict[str, Any]) -> Candidate:
    """An instance as the analysis takes it: an eager kernel's tensors dropped (their sizes are in
    ``constants``), everything else decoded; unknown values named in ``unknown``."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    unknown: list[str] = []
    positional = list(call.get("args", []))
    named = dict(call.get("kwargs", {}))
    if source.eager:
        for index, value in enumerate(positional):
            if index < len(source.params):
                named.setdefault(source.params[index], value)
        positional = []
    for index, raw in enumerate(positional):
        if index < len(source.params):  # by name, so that an unknown one can be left out
            named.setdefault(source.params[index], raw)
            continue
        value = decode_value(raw)
        if value is UNKNOWN:
            unknown.append(f"argument {index + 1}")
        args.append(value)
    for name, raw in named.items():
        if source.eager and name in source.tensor_params and _is_tensor(raw):
            continue
        value = decode_value(raw)
        if value is UNKNOWN:
            unknown.append(name)
        else:
            kwargs[name] = value
    for name, size in constants.items():
        if name in source.consts:
            kwargs[name] = int(size)
    return Candidate(label, tuple(args), kwargs, tuple(unknown))


# ----------------------------------------------------------------------------- recorded runs


_TRACES: dict[str, tuple[tuple[float, int], list[Any]]] = {}
"""Per trace file: its (mtime, size) and its instances, so an unchanged trace is read once."""


def _trace_instances(path: str) -> list[Any]:
    """The instances a trace file records (``irtrace.trace.instances``); none when it is unreadable."""
    from irtrace.base.errors import IrtraceError
    from irtrace.trace.instances import kernel_instances
    from irtrace.trace.reader import load_trace

    try:
        stat = os.stat(path)
    except OSError:
        return []
    stamp = (stat.st_mtime, stat.st_size)
    cached = _TRACES.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        instances = kernel_instances(load_trace(path).runs)
    except (IrtraceError, OSError, ValueError):
        instances = []
    _TRACES[path] = (stamp, instances)
    return instances


def _same_file(definition_path: str, trace: str, file: Path) -> bool:
    """Whether a recorded ``definition`` path names ``file``: absolute, or relative to the folder
    the program ran in (the trace's folder, or one above it), compared by the path's end."""
    target = os.path.realpath(file)
    if os.path.isabs(definition_path):
        return os.path.realpath(definition_path) == target
    if os.path.realpath(Path(trace).parent / definition_path) == target:
        return True
    parts = Path(os.path.normpath(definition_path)).parts
    return ".." not in parts and Path(target).parts[-len(parts) :] == parts


def recorded_candidates(
    traces: tuple[str, ...], file: Path, source: KernelSource, first_line: int
) -> list[Candidate]:
    """The kernel's instances in ``traces``: those whose definition is this file at the kernel's
    decorator or ``def`` line, in the traces' order."""
    found: list[Candidate] = []
    seen: set[str] = set()
    for trace in traces:
        for instance in _trace_instances(trace):
            where, _, line = (instance.definition or "").rpartition(":")
            if not where or not line.isdigit() or not first_line <= int(line) <= source.line:
                continue
            if not _same_file(where, trace, file):
                continue
            label = instance.test_id or (
                f"{instance.processes[0] if instance.processes else 'run'} at {instance.call_site}"
            )
            if label in seen:
                label = f"{label} #{len(found) + 1}"
            seen.add(label)
            found.append(candidate(label, source, instance.args, dict(instance.constants)))
    return found


# ----------------------------------------------------------------------------- the entry point


_MAIN_RUNS: dict[tuple[str, str, str], dict[str, Any]] = {}
"""The last entry-point runs per (path, program, target): an analysis of the same program reuses
them. The program is the text's syntax tree (``program_key``), so an edit to a comment, a blank
line or spacing does not run it again."""
_MAIN_RUNS_KEPT = 4
"""Runs kept: one per target of the document being edited (the default and extra targets)."""


def program_key(text: str) -> str:
    """What the program does, without its comments and layout: its syntax tree, without line
    numbers (two texts with the same tree run the same way). The text itself when it does not
    parse (the run would fail alike)."""
    import ast

    from irtrace.facts.source_tree import parse_source

    try:
        return ast.dump(parse_source(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text


def main_candidates(
    file: Path, text: str, sources: list[tuple[KernelSource, int]], *, target: str, timeout_s: float
) -> tuple[dict[str, Candidate], str | None]:
    """Per kernel, the instance the file's entry point makes first, and how the run ended; nothing
    for a file with no ``__main__`` block (it is not a program)."""
    from irtrace.lowering.resolve.entry_point import EntryKernel, has_entry_point, run_entry_point

    if not has_entry_point(text):
        return {}, None
    key = (str(file), program_key(text), target)
    if key not in _MAIN_RUNS:
        kernels = [EntryKernel(s.name, first, s.line, s.is_jit) for s, first in sources]
        while len(_MAIN_RUNS) >= _MAIN_RUNS_KEPT:  # the oldest goes: edits move on from it
            del _MAIN_RUNS[next(iter(_MAIN_RUNS))]
        _MAIN_RUNS[key] = run_entry_point(str(file), text, kernels, target=target, timeout_s=timeout_s)
    run = _MAIN_RUNS[key]
    by_name = {s.name: s for s, _ in sources}
    found = {}
    for name, call in run.get("instances", {}).items():
        source = by_name.get(name)
        if source is not None:
            found[name] = candidate(MAIN_LABEL, source, call, call.get("constants", {}))
    return found, run.get("outcome")


MAIN_TIMEOUT_S = 10.0
"""How long the entry point may run (below the server's default ``analysisTimeoutS``, so a slow
program costs the instances it had not reached yet, not the worker)."""


@dataclass(frozen=True)
class InstanceSources:
    """Where real instances are found, and the user's pick among them."""

    traces: tuple[str, ...] = ()
    """Trace files recorded from real runs (``irtrace run``, ``IRTRACE=...``)."""
    run_main: bool = True
    """Run the file's entry point (the worker only runs for trusted workspaces)."""
    picks: dict[str, str] = field(default_factory=dict)
    """Per kernel, the label of the instance the user picked (code lens); default: the first."""
    pick: str | None = None
    """The label to take for every kernel without its own pick (``irtrace record --instance``)."""
    manifest_root: str | None = None
    """The highest folder an ``irtrace.toml`` is read from (the MCP server's root); ``None``: any."""


def kernel_candidates(
    file: Path, text: str, sources: list[KernelSource], where: InstanceSources, target: str
) -> dict[str, list[Candidate]]:
    """Per kernel without a directive: its recorded instances, then its entry point's first."""
    found: dict[str, list[Candidate]] = {}
    open_kernels = [s for s in sources if s.directive is None or not s.directive.has_args]
    for source in open_kernels:
        found[source.name] = recorded_candidates(where.traces, file, source, source.first_line or source.line)
    if where.run_main and open_kernels:
        mains, _outcome = main_candidates(
            file,
            text,
            [(s, s.first_line or s.line) for s in open_kernels],
            target=target,
            timeout_s=MAIN_TIMEOUT_S,
        )
        for name, main in mains.items():
            found[name].append(main)
    return found
