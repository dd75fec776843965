"""``diagnostics``: errors and warnings of TileLang's real frontend and pipeline, located in the
kernel's file."""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec import UNSET, UnsetType

from tilelang_mcp import fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.backend import CompilerDiagnostic
from tilelang_mcp.fields import Spec, Target, Timeout
from tilelang_mcp.protocol import Diagnostics
from tilelang_mcp.session import Session

NAME = "diagnostics"
DESCRIPTION = (
    "Errors and warnings from TileLang's real frontend and pipeline for a kernel file (its "
    "module-level PrimFuncs) or one kernel spec: syntax and import errors, build errors, the "
    "failing pass, and the warnings TileLang's checks log (buffer read before written, data race)."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """Which kernel file or spec, for which target."""

    spec: Spec
    target: Target = None
    timeout_s: Timeout = None


class DiagnosedKernel(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One kernel of the spec, and whether it built and lowered."""

    kernel: str
    target: str
    status: str
    """``ok`` or ``failed``."""
    failed_pass: str | UnsetType | None = UNSET


class Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The kernels and what the compiler said about them."""

    kernels: list[DiagnosedKernel]
    diagnostics: list[CompilerDiagnostic]


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """The worker's diagnostics job, one line per diagnostic."""
    answer = await context.job(
        Diagnostics, arguments.spec, arguments.timeout_s, target=context.target(arguments.target)
    )
    found = answer["diagnostics"]
    lines = [
        f"{Path(d['file'] or '?').name}:{d['line'] or '?'}: {d['severity']} [{d['code']}] "
        f"{(d['message'].splitlines() or [''])[0]}"
        for d in found
    ]
    errors = sum(d["severity"] == "error" for d in found)
    head = f"{errors} error(s), {len(found) - errors} warning(s) in {len(answer['kernels'])} kernel(s)"
    return Answer("\n".join([head, *lines]), msgspec.convert(answer, type=Result))
