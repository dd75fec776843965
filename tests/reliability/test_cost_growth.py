"""Every reader's cost is linear in its input: for each record kind the schema knows, a valid trace
with 10x as many records of that kind costs each reader at most about 10x the time and peak memory
(issue 48). The kinds come from the schema (``RECORD_TYPES``), so a new record kind is grown here
as soon as it exists; a quadratic reader (a tuple rebuilt per record, a set per pass) shows as
about 100x.

Each call runs in a forked child: memory is its peak resident size less what the child of a call
that does nothing holds (the test process's own), time its wall clock.
The bounds are loose for a shared machine (a linear reader measures 2-12x), tight enough that the
quadratic readers of issue 48 fail (30-70x on these sizes, measured with the old code).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from irtrace.cli.main import main as irtrace_main
from irtrace.trace.instances import kernel_instances
from irtrace.trace.reader import load_trace
from irtrace.trace.writer import write_merged
from passdiff.cli import main as passdiff_main
from passviz.cli import main as passviz_main
from tests.reliability.cost_growth import GROWS, ONE_PER_FILE, Cost, grown_shape, kinds, measure, write_trace
from tilelang_mcp import backend, line_tool
from tilelang_mcp.roots import AllowedRoots
from tilelang_mcp.server import ServerConfig, TileLangMcp

FACTOR = 10
TIME_BOUND = 2.5 * FACTOR
"""Most a reader's time may grow when one kind grows ``FACTOR`` times (quadratic: 30-100x here)."""
MEMORY_BOUND = 1.6 * FACTOR
RETRIES = 3
SMALL_COST_S = 0.002
"""Below this, a time is noise: the growth is measured from it."""
SMALL_PEAK = 8 << 20
"""Below this, memory a reader adds is noise (the allocator's arenas): the growth is measured from it."""


Reader = Callable[[Path, Path], object]
"""A reader run on a trace file, with a folder for what it writes."""


def _cli(main: Callable[[list[str]], int], *args: str) -> Reader:
    def read(trace: Path, out: Path) -> object:
        code = main([part.format(trace=trace, out=out) for part in args])
        assert code in (0, 1), code  # passdiff exits 1 for "differences found"
        return code

    return read


def _mcp_tool(tool: str, **arguments: object) -> Reader:
    """A tool of the real server object, its trace loaded in this process (in the server a child
    loads it first, measured by the ``mcp trace copy`` reader) so the cost is all measured here."""

    def read(trace: Path, out: Path) -> object:
        app = TileLangMcp(ServerConfig(AllowedRoots([trace.parent]), store=out))  # its worker never starts

        async def load_here(path: Path) -> backend.Trace:
            return load_trace(path)

        app.session.load_file = load_here  # type: ignore[method-assign]
        given = {name: str(trace) if value is _TRACE else value for name, value in arguments.items()}
        answer = anyio.run(app.call_tool, tool, given)
        assert not answer.isError, answer.content
        return answer

    return read


_TRACE = object()


def _line_answer(trace: Path, out: Path) -> object:
    """What ``source_line_ir``'s child computes (``python -m tilelang_mcp.line_tool``)."""
    loaded = load_trace(trace)
    return line_tool.line_answer("t1", loaded, loaded.find_run("k0", None), 6, None)


def _mcp_copy(trace: Path, out: Path) -> object:
    """What every trace tool's child does first (``python -m tilelang_mcp.trace_copy``)."""
    return write_merged([load_trace(trace)], out / "copy.jsonl")


def _recorded_run(trace: Path, out: Path) -> object:
    """The language server's recorded-run reader (``resolve.candidates._trace_instances``)."""
    return kernel_instances(load_trace(trace).runs)


READERS: dict[str, Reader] = {
    "load": lambda trace, out: load_trace(trace),
    "show": _cli(irtrace_main, "show", "{trace}"),
    "check": _cli(irtrace_main, "check", "{trace}", "--baseline", "{trace}", "-q"),
    "merge": _cli(irtrace_main, "merge", "{trace}", "{trace}", "-o", "{out}/merged.jsonl"),
    "ir --line": _cli(irtrace_main, "ir", "{trace}", "-k", "k0", "--line", "6"),
    "spans": _cli(irtrace_main, "spans", "{trace}", "--all"),
    "passdiff pass": _cli(passdiff_main, "pass", "{trace}", "-k", "k0", "-p", "tl.Pass1#1", "-f", "json"),
    "passviz html": _cli(passviz_main, "html", "{trace}", "-k", "k0", "-o", "{out}/report.html"),
    "lsp recorded run": _recorded_run,
    "mcp trace copy": _mcp_copy,
    "mcp get_ir": _mcp_tool("get_ir", pass_name="tl.Pass1#1", trace=_TRACE, kernel="k0"),
    "mcp diff_passes": _mcp_tool("diff_passes", from_pass="tl.Pass1#1", trace=_TRACE, kernel="k0"),
    "mcp check_trace": _mcp_tool("check_trace", trace=_TRACE, baseline=_TRACE),
    "mcp source_line_ir": _line_answer,
}
"""Every reader of a trace a person or an agent can point at a file. The MCP tools that take only a
spec (lower_kernel, coverage_matrix, machine_code, buffer_facts, diagnostics) read traces their
own job wrote; their trace-reading part is ``mcp trace copy`` and the tools above."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    folder = tmp_path_factory.mktemp("grown")
    return {
        (count, factor): write_trace(folder / f"{count}-{factor}.jsonl", grown_shape(count, factor))
        for count in set(GROWS.values())
        for factor in (1, FACTOR)
    }


def test_every_record_kind_of_the_schema_is_grown() -> None:
    assert set(kinds()) | ONE_PER_FILE == set(GROWS) | ONE_PER_FILE
    assert set(kinds()) == set(GROWS), "a new record kind: say in cost_growth.GROWS how to grow it"


def _least(one: Cost, other: Cost) -> Cost:
    return Cost(min(one.seconds, other.seconds), min(one.peak_bytes, other.peak_bytes))


def _growth(small: Cost, large: Cost, idle: Cost) -> tuple[float, float]:
    seconds = max(large.seconds, SMALL_COST_S) / max(small.seconds, SMALL_COST_S)
    added_small, added_large = small.peak_bytes - idle.peak_bytes, large.peak_bytes - idle.peak_bytes
    memory = max(added_large, SMALL_PEAK) / max(added_small, SMALL_PEAK)
    return seconds, memory


@pytest.mark.parametrize("reader", list(READERS))
def test_cost_grows_at_most_linearly_with_each_record_kind(
    reader: str, traces: dict[tuple[str, int], Path], tmp_path: Path
) -> None:
    read = READERS[reader]
    read(traces[("passes", 1)], tmp_path)  # imports and caches warmed outside the measurement
    idle = measure(lambda: None)
    over = []
    for count in sorted(set(GROWS.values())):  # kinds that grow together (a pass and its start) once
        kind = "/".join(k for k in kinds() if GROWS[k] == count)
        small = measure(functools.partial(read, traces[(count, 1)], tmp_path))
        large = measure(functools.partial(read, traces[(count, FACTOR)], tmp_path))
        for _ in range(RETRIES):  # a busy machine: the least of a few measurements before judging
            seconds, memory = _growth(small, large, idle)
            if seconds <= TIME_BOUND and memory <= MEMORY_BOUND:
                break
            small = _least(small, measure(functools.partial(read, traces[(count, 1)], tmp_path)))
            large = _least(large, measure(functools.partial(read, traces[(count, FACTOR)], tmp_path)))
        seconds, memory = _growth(small, large, idle)
        if seconds > TIME_BOUND or memory > MEMORY_BOUND:
            over.append(
                f"{kind} x{FACTOR}: time x{seconds:.1f} ({small.seconds:.3f} -> {large.seconds:.3f} s), "
                f"memory x{memory:.1f} ({(small.peak_bytes - idle.peak_bytes) >> 20} -> "
                f"{(large.peak_bytes - idle.peak_bytes) >> 20} MiB added)"
            )
    assert not over, f"{reader} grows faster than its input:\n" + "\n".join(over)
