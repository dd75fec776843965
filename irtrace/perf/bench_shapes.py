"""Sizes for a kernel's symbolic dimensions when ``--bench`` times it, and the arithmetic of repeated
measurements. A kernel with ``T.dynamic("tokens")`` cannot be launched until ``tokens`` has a size:
from ``--bench-shape`` (the command line), the manifest's ``bench_shape`` table, or the captured call's
tensors (``irtrace run``), in that order. No tilelang here.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from irtrace.base.errors import IrtraceError, UsageError

FROM_COMMAND_LINE = "--bench-shape"
FROM_MANIFEST = "manifest"
FROM_CAPTURED = "captured"

BENCH_REPEAT = 5
"""``--bench-repeat``'s default: timed ``do_bench`` calls after the warm-up one, their median kept."""

_BINDING = re.compile(r"\A(?:(?P<kernel>[^:=\s]+):)?(?P<name>[A-Za-z_][\w.]*)=(?P<size>[^=]*)\Z")
_EXAMPLE = "e.g. --bench-shape tokens=4096, or token_matmul:tokens=4096 for one kernel"


class MissingShapeError(IrtraceError):
    """A symbolic dimension has no size from any source: the run's bench fails saying which."""


@dataclass(frozen=True)
class CommandLineShapes:
    """The ``--bench-shape [KERNEL:]NAME=SIZE`` options, parsed."""

    every_kernel: Mapping[str, int] = field(default_factory=dict)
    """``NAME=SIZE``: for every kernel with that symbolic dimension."""
    per_kernel: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """``KERNEL:NAME=SIZE``: for the kernel recorded under that name only (wins over ``NAME=SIZE``)."""

    def for_kernel(self, kernel: str) -> dict[str, int]:
        """The sizes the command line gives this kernel."""
        return {**self.every_kernel, **self.per_kernel.get(kernel, {})}


@dataclass(frozen=True)
class BenchSettings:
    """The ``--bench-shape`` and ``--bench-repeat`` options, checked."""

    shapes: CommandLineShapes = field(default_factory=CommandLineShapes)
    repeat: int = BENCH_REPEAT


NO_SHAPES = CommandLineShapes()
DEFAULT_BENCH = BenchSettings()


def parse_bench_shapes(items: Iterable[str]) -> CommandLineShapes:
    """Parse ``--bench-shape`` values; ``UsageError`` (exit 2) names the bad one and the right form."""
    every: dict[str, int] = {}
    per: dict[str, dict[str, int]] = {}
    for item in items:
        match = _BINDING.match(item.strip())
        if match is None:
            raise UsageError(f"--bench-shape {item!r}: write [KERNEL:]NAME=SIZE ({_EXAMPLE})")
        size_text = match["size"].strip()
        if not size_text.isdigit() or int(size_text) < 1:
            raise UsageError(
                f"--bench-shape {item!r}: the size {size_text!r} is not a whole number from 1 up ({_EXAMPLE})"
            )
        kernel, name, size = match["kernel"], match["name"], int(size_text)
        table = every if kernel is None else per.setdefault(kernel, {})
        if table.get(name, size) != size:
            where = f"{kernel}:{name}" if kernel else name
            raise UsageError(f"--bench-shape {where} is given twice, as {table[name]} and {size}")
        table[name] = size
    return CommandLineShapes(every, per)


def resolve_shape(
    kernel: str,
    symbols: Sequence[str],
    *,
    command_line: Mapping[str, int],
    manifest: Mapping[str, int],
    captured: Mapping[str, int],
) -> tuple[dict[str, int], str]:
    """The size of each of the kernel's symbolic dimensions and where they came from.

    Each dimension takes the first source that has it: command line, manifest, captured call.
    ``shape_from`` names the sources used, joined by ``+`` when they differ per dimension, and is
    ``""`` for a kernel with no symbolic dimension. ``MissingShapeError`` lists every dimension
    that has no size.
    """
    sources = ((FROM_COMMAND_LINE, command_line), (FROM_MANIFEST, manifest), (FROM_CAPTURED, captured))
    shape: dict[str, int] = {}
    used: list[str] = []
    missing: list[str] = []
    for symbol in symbols:
        found = next(((source, sizes[symbol]) for source, sizes in sources if symbol in sizes), None)
        if found is None:
            missing.append(symbol)
            continue
        shape[symbol] = found[1]
        if found[0] not in used:
            used.append(found[0])
    if missing:
        options = " ".join(f"--bench-shape {kernel}:{name}=SIZE" for name in missing)
        table = ", ".join(f"{name} = SIZE" for name in missing)
        raise MissingShapeError(
            f"not benched: {kernel} has symbolic dimension(s) {', '.join(missing)} with no size; give "
            f"{options} (or NAME=SIZE for every kernel), or bench_shape = {{{table}}} in the manifest"
        )
    order = [source for source, _ in sources if source in used]
    return shape, "+".join(order)


def median_ms(samples: Sequence[float]) -> float:
    """The latency recorded for repeated measurements: their median (robust to one slow repetition)."""
    if not samples:
        raise ValueError("no samples")
    return float(statistics.median(samples))
