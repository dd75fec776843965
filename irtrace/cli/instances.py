"""``irtrace instances TRACE``: the kernel instances a captured program really made (arguments,
``T.const`` sizes, call site, test id), as a table or as the documented JSON document."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from irtrace.core.errors import ExitCode, exit_codes_help
from irtrace.core.instances import KernelInstance, instances_document, kernel_instances
from irtrace.core.safe_text import terminal_safe
from irtrace.edge.command import echo, load_trace_warning_if_cut


def add_instances_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``instances`` to ``irtrace``'s subcommands."""
    parser = commands.add_parser(
        "instances",
        help="the kernel instances a captured program made: arguments, sizes, call site, test",
        description="List the distinct kernel instances in traces captured by `irtrace run` or "
        "IRTRACE=...: each kernel's arguments, T.const and T.dynamic sizes, tensors, call site and "
        "pytest test id, with the targets it was lowered for. Runs recorded from a spec "
        "(`irtrace record`) have no instance and are not listed.",
        epilog="--json prints the document described in docs/capture.md (format irtrace-instances/1)\n\n"
        + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("traces", nargs="+", metavar="TRACE")
    parser.add_argument("-k", "--kernel", help="only this kernel's instances")
    parser.add_argument("--json", action="store_true", help="print the documented JSON document")


def cmd_instances(args: argparse.Namespace) -> ExitCode:
    found: list[KernelInstance] = []
    for path in args.traces:
        found += kernel_instances(load_trace_warning_if_cut(path, "irtrace").runs, args.kernel)
    if args.json:
        echo(json.dumps(instances_document(found), indent=2))
        return ExitCode.OK
    if not found:
        echo("no captured kernel instances (traces from `irtrace run` or IRTRACE=... have them)")
        return ExitCode.OK
    for number, instance in enumerate(found, 1):
        echo(terminal_safe(_describe(number, instance)))
    return ExitCode.OK


def _describe(number: int, instance: KernelInstance) -> str:
    """A few lines per instance: what a person scanning for "which sizes, from where" reads."""
    lines = [
        f"{number}. {instance.kernel}"
        + (f"  (defined at {instance.definition})" if instance.definition else "")
    ]
    for label, value in (
        ("call", instance.call_site),
        ("test", instance.test_id),
        ("sizes", _pairs(instance.constants)),
        ("dynamic", _pairs(instance.dynamic)),
        ("tensors", _tensors(instance.tensors)),
        ("arguments", _arguments(instance.args)),
        ("targets", ", ".join(instance.targets)),
        ("process", ", ".join(instance.processes)),
    ):
        if value:
            lines.append(f"   {label + ':':<10} {value}")
    for signature in instance.launches:
        lines.append(f"   {'launch:':<10} {_launch(signature)}")
    return "\n".join(lines)


def _launch(signature: dict[str, Any]) -> str:
    """``×3 A float16[96, 64]/[64, 1], num_chunks=3``: one launch signature and its count."""
    parts = []
    for arg in signature.get("args", []):
        name = arg.get("param") or "?"
        if arg.get("shape") is not None:
            dims = ", ".join(str(d) for d in arg["shape"])
            strides = ", ".join(str(d) for d in arg.get("strides") or [])
            parts.append(f"{name} {arg.get('dtype', '?')}[{dims}]/[{strides}]")
        elif "value" in arg:
            parts.append(f"{name}={arg['value']!r}")
        else:
            parts.append(f"{name} {arg.get('kind', '?')}")
    return f"×{signature.get('count', 0)} " + ", ".join(parts)


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


def _tensors(tensors: dict[str, Any]) -> str:
    return ", ".join(
        f"{name} {tensor.get('dtype', '?')}[{', '.join(str(d) for d in tensor.get('shape', []))}]"
        for name, tensor in tensors.items()
    )


def _arguments(args: dict[str, Any]) -> str:
    """The call as Python spells it: ``128, block_M=128, trans_A=False, dtype=T.float16``."""
    positional = [python_spelling(value) for value in args.get("args", [])]
    keywords = [f"{key}={python_spelling(value)}" for key, value in args.get("kwargs", {}).items()]
    return ", ".join(positional + keywords)


_DTYPE = re.compile(r"T\.\w+")
"""How a run records a dtype argument (``T.float16``): written as code, not as a string."""
_TENSOR_KEYS = {"shape", "dtype", "device"}


def python_spelling(value: Any) -> str:
    """A recorded argument (JSON) as Python source: ``False`` and ``None``, not ``false`` and
    ``null``; strings quoted except dtypes; a tensor by its dtype and shape."""
    if isinstance(value, str):
        return value if _DTYPE.fullmatch(value) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(python_spelling(item) for item in value) + "]"
    if isinstance(value, dict):
        if set(value) == _TENSOR_KEYS and isinstance(value["shape"], list):
            return f"<tensor {value['dtype']}[{', '.join(str(d) for d in value['shape'])}]>"
        return "{" + ", ".join(f"{key!r}: {python_spelling(item)}" for key, item in value.items()) + "}"
    return repr(value)
