"""Kernel instances a program really made, read from captured runs: the answer to "with which
arguments is this kernel used, and where?" that ``irtrace instances`` prints and the language
server reads.

An instance is one instantiation of a kernel (its arguments, ``T.const`` and ``T.dynamic`` sizes
and tensors) at one call site, in one test; the runs that lowered it for several targets, or in
several processes, are one instance. The JSON document is versioned (``FORMAT``) and documented in
docs/capture.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from irtrace.trace.schema import Instance, KernelRun

INSTANCE_TRACES = ("irtrace.jsonl", ".irtrace/*.jsonl")
"""Where the tools look, in a workspace's root, for traces of real runs whose instances they use."""

FORMAT = "irtrace-instances/1"
"""The ``format`` of the JSON document; a change that breaks readers gets a new number."""


class KernelInstance(msgspec.Struct, frozen=True, kw_only=True):
    """One instantiation of a kernel and the runs that lowered it."""

    kernel: str
    """the kernel's name, as the run names it"""
    definition: str | None
    """`path:line` of the kernel's Python function, when the capture knew it"""
    call_site: str | None
    """`path:line` of the program's call that compiled it"""
    test_id: str | None
    """the pytest test that made it"""
    args: dict[str, Any]
    """the call's arguments, as the run records them (`{"args": [...], "kwargs": {...}}`)"""
    constants: dict[str, int]
    """`T.const` sizes"""
    dynamic: dict[str, int]
    """`T.dynamic` sizes of the call's tensors"""
    tensors: dict[str, Any]
    """per tensor parameter: `shape`, `dtype`, `device`"""
    processes: list[str]
    """the processes that made it (`pid 4242, rank 3 of 8`)"""
    targets: list[str]
    """the targets it was lowered for, in the trace's order"""
    runs: list[int]
    """the trace's run ids"""
    launches: list[Any] = []
    """what the program passed at each launch of the compiled kernel, by distinct signature
    (`LaunchSignature`: `args`, each a tensor's `shape`, `dtype`, `strides` or a scalar's
    `value`, and `count`), from the instance's first run that has them"""


def _identity(run: KernelRun, instance: Instance) -> str:
    """What makes two captured runs the same instance: everything but the process and target."""
    return json.dumps(
        [
            run.kernel,
            instance.definition,
            instance.call_site,
            instance.test_id,
            run.args,
            instance.constants,
            instance.dynamic,
            msgspec.to_builtins(instance.tensors),
        ],
        sort_keys=True,
        default=str,
    )


def kernel_instances(runs: Iterable[KernelRun], kernel: str | None = None) -> list[KernelInstance]:
    """The distinct instances among ``runs`` captured from programs (runs with an ``instance``),
    in the order the trace first holds them; ``kernel`` keeps that kernel's only."""
    groups: dict[str, dict[str, Any]] = {}
    for run in runs:
        instance = run.instance
        if instance is None or (kernel is not None and run.kernel != kernel):
            continue
        group = groups.setdefault(
            _identity(run, instance),
            {
                "kernel": run.kernel,
                "definition": instance.definition,
                "call_site": instance.call_site,
                "test_id": instance.test_id,
                "args": run.args,
                "constants": dict(instance.constants),
                "dynamic": dict(instance.dynamic),
                "tensors": msgspec.to_builtins(instance.tensors),
                "processes": [],
                "targets": [],
                "runs": [],
                "launches": [],
            },
        )
        if run.launches and not group["launches"]:
            group["launches"] = msgspec.to_builtins(list(run.launches))
        for key, value in (("processes", instance.process), ("targets", run.target)):
            if value not in group[key]:
                group[key].append(value)
        group["runs"].append(run.run_id)
    return [KernelInstance(**group) for group in groups.values()]


def instances_document(instances: list[KernelInstance]) -> dict[str, Any]:
    """The JSON document ``irtrace instances --json`` prints."""
    return {"format": FORMAT, "instances": msgspec.to_builtins(instances)}


def instance_trace_files(root: Path) -> tuple[str, ...]:
    """The trace files of real runs in ``root`` the tools take instances from (``INSTANCE_TRACES``),
    those that exist."""
    paths = [root / "irtrace.jsonl", *sorted((root / ".irtrace").glob("*.jsonl"))]
    return tuple(str(p) for p in paths if p.is_file())
