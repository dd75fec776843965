"""Text for hints, hovers and code lenses, from the worker's facts (``tilelang_lsp.protocol``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from irtrace.trace.resources import KernelResources, resource_summary
from tilelang_lsp.options import InlayHintOptions
from tilelang_lsp.protocol import OK, Buffer, CompiledKernel, KernelAnalysis
from tilelang_lsp.source.buffers import ASCEND_SCOPE_NAMES, SourceBuffer

SOURCE_ONLY = "source only"
NEEDS_VALUES_HINT = "a `# tilelang: args(...)` directive or a recorded run (irtrace run, IRTRACE=) gives it"
"""What would give a kernel the values nobody gives (the words of irtrace's resolver)."""


def scope_name(scope: str, target: str | None) -> str:
    """Ascend's memory names (``UB``, ``L1``, ``L0C``) on Ascend; TileLang's scope elsewhere."""
    if target == "ascend":
        return ASCEND_SCOPE_NAMES.get(scope, scope)
    return scope


def shape_text(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def stages_suffix(fact: Buffer) -> str:
    """``×3`` when pipelining gave the buffer a leading stage dimension."""
    shape, allocated = fact.shape, fact.allocated_shape
    if len(allocated) == len(shape) + 1 and allocated[1:] == shape:
        return f" ×{allocated[0]}"
    return ""


def hint_label(fact: Buffer, target: str | None, options: InlayHintOptions) -> str:
    """``[128, 32] ×3 float16 shared.dyn · swizzle 64B``, as the options allow."""
    parts = []
    if options.shape:
        parts.append(shape_text(fact.shape) + stages_suffix(fact))
    if options.dtype:
        parts.append(fact.dtype)
    if options.scope:
        parts.append(scope_name(fact.scope, target))
    label = " ".join(parts)
    if options.layout and fact.layout_short:
        label = f"{label} · {fact.layout_short}" if label else fact.layout_short
    return label


def source_hint_label(buffer: SourceBuffer, options: InlayHintOptions, why: str) -> str:
    """A hint from the text alone, marked as such."""
    parts = []
    if options.shape:
        parts.append(buffer.shape)
    if options.dtype:
        parts.append(buffer.dtype)
    if options.scope:
        parts.append(buffer.scope)
    return f"{' '.join(parts)} ({why})"


def _kib(size: int | None) -> str:
    if size is None:
        return "?"
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def hover_markdown(
    fact: Buffer,
    kernel: KernelAnalysis,
    others: list[tuple[str, Buffer | None, str | None]],
) -> str:
    """The buffer's facts, its layout in full, and its layout on the other targets."""
    target = kernel.target
    lines = [
        f"**{fact.name}** — {'kernel parameter' if fact.role == 'param' else 'allocation'} "
        f"in `{kernel.name}`",
        "",
        "| | |",
        "|---|---|",
        f"| shape | `{shape_text(fact.shape)}` |",
    ]
    if fact.allocated_shape != fact.shape:
        lines.append(f"| allocated | `{shape_text(fact.allocated_shape)}` (after pipelining) |")
    lines += [
        f"| dtype | `{fact.dtype}` |",
        f"| scope | `{scope_name(fact.scope, target)}`"
        + (f" (`{fact.scope}`)" if scope_name(fact.scope, target) != fact.scope else "")
        + " |",
        f"| size | {_kib(fact.bytes)} |",
    ]
    if fact.layout_short:
        lines.append(f"| layout | {fact.layout_short} |")
    if fact.layout_long:
        lines += ["", f"Layout on `{target}` after `{kernel.stop_pass or 'layout inference'}`:", ""]
        lines += ["```", _wrap_layout(fact.layout_long), "```"]
    if others:
        lines += ["", "| target | scope | layout |", "|---|---|---|"]
        lines.append(f"| **{target}** | `{scope_name(fact.scope, target)}` | {fact.layout_short or '—'} |")
        for name, other, problem in others:
            if other is None:
                lines.append(f"| {name} | — | {problem or 'not analyzed yet'} |")
            else:
                lines.append(f"| {name} | `{scope_name(other.scope, name)}` | {other.layout_short or '—'} |")
    lines += ["", provenance(kernel)]
    return "\n".join(lines)


def provenance(kernel: KernelAnalysis) -> str:
    """Which arguments and target were used and where they came from."""
    text = (
        f"Analyzed `{kernel.call}` — arguments from {kernel.args_origin}"
        f"; target `{kernel.target}` from {kernel.target_origin}."
    )
    if kernel.args_autotune:
        values = ", ".join(f"{k}={v}" for k, v in kernel.args_autotune.items())
        text += f" From the first @autotune config: {values}."
    if kernel.args_from_project:
        text += f" From pyproject.toml: {', '.join(kernel.args_from_project)}."
    if kernel.args_unknown:
        text += f" Unknown (the run passed what cannot be made here): {', '.join(kernel.args_unknown)}."
    if kernel.args_symbolic:
        text += f" Symbolic (no value found): {', '.join(kernel.args_symbolic)}."
    if kernel.needs_values:
        text += f" No value for {', '.join(kernel.needs_values)}: {NEEDS_VALUES_HINT}."
    others = [label for label in kernel.instances if label != kernel.args_origin]
    if others:
        text += f" Other instances (code lens): {', '.join(others)}."
    return text


def machine_summary(resources: Sequence[KernelResources]) -> str:
    """``regs 240 · spills 0 · smem 49.0 KiB`` (the worst function)."""
    return resource_summary(list(resources))


LENS_TEXT_CHARS = 80
"""How much of a message a code lens shows: more does not fit beside a kernel's line."""
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s:'\"()\[\],]+/)+([^\s:'\"()\[\],]+)")
"""An absolute path; group 1 is its file name (``/usr/local/cuda/bin/nvcc`` -> ``nvcc``)."""
_STATIC_ASSERTION = re.compile(r'^static assertion failed with "(.*)"$')


def _first_error_line(error: str) -> str:
    """nvcc's first ``error:`` message, without the header path and line, and for a failed
    ``static_assert`` only its message (``tl::... requires a target with ..., such as sm_90a``)."""
    lines = error.strip().splitlines() or [""]
    line = next((line.split(": error", 1)[1].lstrip(": ") for line in lines if ": error" in line), lines[0])
    assertion = _STATIC_ASSERTION.match(line.strip())
    return assertion[1] if assertion else line


def lens_message(text: str, width: int = LENS_TEXT_CHARS) -> str:
    """A message in at most ``width`` characters for a lens: tools by file name (not a path cut
    in its middle), and a long message cut in its middle, keeping its start (what failed) and
    its end, where compilers say what to do (``such as sm_90a``)."""
    text = " ".join(_ABSOLUTE_PATH.sub(r"\1", text).split())
    if len(text) <= width:
        return text
    head = text[: (width - 3) * 2 // 5]
    tail = text[len(text) - (width - 3 - len(head)) :]
    # whole words on both sides of the cut, where the text has spaces to cut at
    head = head.rsplit(" ", 1)[0] if " " in head else head
    tail = tail.split(" ", 1)[1] if " " in tail else tail
    return f"{head} … {tail}"


def _wrap_layout(text: str) -> str:
    """One field per line: TileLang prints a layout on one long line."""
    for key in (
        ", replicate:",
        ", thread:",
        ", forward_thread:",
        ", forward_index:",
        ", thread_range:",
        ", transform:",
    ):
        text = text.replace(key, ",\n  " + key[2:])
    return text


def lens_title(
    kernel: KernelAnalysis,
    summary: KernelAnalysis | None,
    machine: CompiledKernel | None = None,
    *,
    compiling: bool = True,
) -> str:
    """``cuda:sm_90 · 85 passes · 312 ms · smem 48.0 KiB`` (the layout-stage figures until the summary);
    for CUDA, once nvcc compiled the source, ``cuda:sm_90a · 88 passes · 312 ms · regs 240 · spills 0
    · smem 49.0 KiB`` (registers and spills from ptxas, shared memory static plus dynamic)."""
    if kernel.status != OK:
        return f"{kernel.target} · failed: {lens_message(kernel.error or '')}"
    if summary is not None and summary.status == OK:
        head = f"{kernel.target} · {summary.passes} passes · {summary.lowering_ms:.0f} ms"
        if machine is not None and machine.resources:
            return f"{head} · {machine_summary(machine.resources)}"
        tail = f"{head} · smem {_kib(kernel.shared_bytes)}"
        if machine is not None and machine.error:
            return f"{tail} · nvcc: {lens_message(_first_error_line(machine.error))}"
        if compiling and summary.machine_code is not None and machine is None:
            return f"{tail} · compiling…"
        return tail
    if summary is not None:
        return f"{kernel.target} · lowering failed in {summary.failed_pass or 'the pipeline'}"
    return (
        f"{kernel.target} · {kernel.passes} passes to {kernel.stop_pass} · "
        f"{kernel.lowering_ms:.0f} ms · smem {_kib(kernel.shared_bytes)}"
        " (full lowering pending)"
    )
