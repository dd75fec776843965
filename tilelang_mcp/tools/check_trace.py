"""``check_trace``: a trace against a baseline, as ``irtrace check`` does."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from tilelang_mcp import backend, fields
from tilelang_mcp.answers import Answer
from tilelang_mcp.session import Session

NAME = "check_trace"
DESCRIPTION = (
    "Check a trace against a baseline as `irtrace check` does: per kernel x target, added, removed "
    "or newly failing runs, the first pass whose IR changed, pass list and kernel source changes, "
    "time and metrics; `gated` says whether the policy fails it."
)


class Arguments(fields.Arguments, frozen=True, kw_only=True):
    """The new trace, its baseline, and the policy."""

    trace: Annotated[str, Meta(description="The new trace: a session trace id (t2) or a trace file.")]
    baseline: Annotated[str, Meta(description="The baseline: a session trace id (t1) or a trace file.")]
    policy: Annotated[
        str | None, Meta(description="An irtrace-policy.toml under the roots (default: irtrace's defaults).")
    ] = None


class Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``irtrace check --json``'s report (docs/ci.md documents its runs)."""

    schema: int
    """The report format's version."""
    baseline: str
    new: str
    policy: dict[str, Any]
    gated: bool
    """Whether the policy fails the check."""
    exit_code: int
    counts: dict[str, int]
    notes: list[str]
    runs: list[dict[str, Any]]
    """One check per kernel x target, as docs/ci.md describes it."""


async def handle(context: Session, arguments: Arguments) -> Answer[Result]:
    """Load both traces and run the check."""
    _, new = await context.load(arguments.trace)
    _, old = await context.load(arguments.baseline)
    policy = arguments.policy
    policy_path = str(context.config.roots.check(policy, "policy file")) if policy is not None else None
    document, text = backend.check_report(new, old, policy_path)
    lines = text.strip().splitlines()
    # the counts and the verdict (render_text's second and last lines); the whole text follows
    return Answer(f"{lines[1]}\n{lines[-1]}", msgspec.convert(document, type=Result), text)
