"""``irtrace instances TRACE``: the kernel instances a captured program really made (arguments,
``T.const`` sizes, call site, test id), as a table or as the documented JSON document.
``irtrace instances FILE.py``: the instances the resolver finds for a kernel file's kernels (what
``irtrace record FILE.py::kernel``, the editor and the MCP server take), without a GPU."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from irtrace.base.errors import ExitCode, UsageError, exit_codes_help
from irtrace.base.safe_text import terminal_safe
from irtrace.cli.resolved import RESOLVED_FORMAT, provenance_line
from irtrace.edge.command import echo, load_trace_warning_if_cut
from irtrace.trace.instances import KernelInstance, instances_document, kernel_instances


def add_instances_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``instances`` to ``irtrace``'s subcommands."""
    parser = commands.add_parser(
        "instances",
        help="the kernel instances a captured program made: arguments, sizes, call site, test",
        description="List the distinct kernel instances in traces captured by `irtrace run` or "
        "IRTRACE=...: each kernel's arguments, T.const and T.dynamic sizes, tensors, call site and "
        "pytest test id, with the targets it was lowered for. Runs recorded from a spec "
        "(`irtrace record`) have no instance and are not listed. Given a kernel file (FILE.py or "
        "FILE.py::kernel), list instead the instance the resolver takes for each kernel named without "
        "arguments, and the other real instances --instance can choose, as `irtrace record`, the editor "
        "and the MCP server find them: nothing is lowered and no GPU is needed.",
        epilog="--json prints the document described in docs/capture.md (format irtrace-instances/1); "
        f"for a kernel file, the one in docs/irtrace.md ({RESOLVED_FORMAT})\n\n" + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("traces", nargs="+", metavar="TRACE|FILE.py")
    parser.add_argument("-k", "--kernel", help="only this kernel's instances")
    parser.add_argument(
        "-t",
        "--target",
        help="for a kernel file: the target the entry point runs for (default: the dialect's)",
    )
    parser.add_argument("--json", action="store_true", help="print the documented JSON document")


def _is_kernel_file(argument: str) -> bool:
    return "::" in argument or argument.endswith(".py")


def cmd_instances(args: argparse.Namespace) -> ExitCode:
    files = [a for a in args.traces if _is_kernel_file(a)]
    if files:
        if len(files) != len(args.traces):
            raise UsageError("give trace files or kernel files (FILE.py), not both")
        return _file_instances(files, args)
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


def _file_instances(files: list[str], args: argparse.Namespace) -> ExitCode:
    from irtrace.cli.resolved import cli_instance_sources
    from irtrace.lowering.api import RecordRequest
    from irtrace.targets.specs import parse_spec

    requests = []
    for text in files:
        spec = parse_spec(text if "::" in text or not args.kernel else f"{text}::{args.kernel}")
        if spec.called:
            raise UsageError(f"{text}: name the kernel without arguments to see which instance it takes")
        request = RecordRequest(
            spec, (args.target,) if args.target else (), instances=cli_instance_sources(None)
        )
        check_kernel_file(request)
        if spec.name:
            requests.append(request)
            continue
        # the whole file: each kernel the resolver sees in it (factories and jit kernels)
        requests += [replace(request, spec=replace(spec, name=name)) for name in _kernel_names(spec.path)]
    return print_file_instances(requests, as_json=args.json)


def _kernel_names(path: str) -> list[str]:
    """The kernels of a file as its source shows them (``scan_kernels``); an unreadable file fails
    later, when it is loaded, with the loader's words."""
    from pathlib import Path

    from irtrace.lowering.resolve.source import scan_kernels

    try:
        text = Path(path).expanduser().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [kernel.name for kernel in scan_kernels(text)]


def print_file_instances(requests: Sequence[Any], *, as_json: bool) -> ExitCode:
    """What the resolver finds for each kernel of each request's file (``file_instances``), as
    lines or as the ``irtrace-resolved/1`` document."""
    from irtrace.lowering.api import file_instances
    from irtrace.lowering.resolve.resolver import describe

    kernels: list[dict[str, Any]] = []
    for request in requests:
        for found in file_instances(request):
            kernels.append(
                {
                    "file": str(request.spec.path),
                    "kernel": found.kernel,
                    "target": found.target,
                    "instance": dict(describe(found.chosen)),
                    "others": [dict(describe(other)) for other in found.others],
                }
            )
    if as_json:
        echo(json.dumps({"format": RESOLVED_FORMAT, "kernels": kernels}, indent=2))
        return ExitCode.OK
    if not kernels:
        echo("no kernel taking arguments found (a module-level PrimFunc takes none)")
    for entry in kernels:
        echo(provenance_line(entry["kernel"], entry["instance"]) + f" (for {entry['target']})", one_line=True)
        for other in entry["others"]:
            echo(f"   --instance {other['origin']!r}: `{other['call']}`", one_line=True)
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


def check_kernel_file(request: Any) -> None:
    """A spec naming a file that is not there fails before anything is written."""
    from pathlib import Path

    from irtrace.lowering.loader import is_module_name, resolve_kernel_file

    path = Path(request.spec.path).expanduser()
    if request.base_dir is not None and not path.is_absolute():
        path = request.base_dir / path
    if path.exists() or not is_module_name(request.spec.path):
        resolve_kernel_file(path)
