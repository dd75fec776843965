"""The run pane: what was lowered and how (spec, arguments, pass configs), its error, and whether
the trace was cut short; with the legend of the code pane's colours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from irtrace.perf.latency import latency_text, resource_lines
from irtrace.trace.model import KernelRun, Trace
from passviz.model import format_ms
from passviz.semantics import CATEGORIES


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def run_notice(trace: Trace, run: KernelRun) -> str | None:
    """A warning about what the trace lacks for this run, or ``None``."""
    if run.status == "incomplete":
        return "this run was cut short: the recording stopped before it ended; later passes are missing"
    if trace.truncated:
        return "the trace file was cut short (a recording that was killed); some runs may be incomplete"
    return None


def run_facts(trace: Trace, run: KernelRun) -> Table:
    """Spec, arguments, pass configs, target, versions, status and error as a two-column table."""
    table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("kernel", Text(run.kernel))  # Text: trace text is not Rich markup
    table.add_row("spec", Text(run.spec))
    args = run.args.get("args", []) if isinstance(run.args, dict) else []
    kwargs = run.args.get("kwargs", {}) if isinstance(run.args, dict) else {}
    shown = ", ".join([_value(a) for a in args] + [f"{k}={_value(v)}" for k, v in kwargs.items()])
    table.add_row("arguments", Text(shown or "(none)"))
    configs = "\n".join(f"{k} = {_value(v)}" for k, v in run.pass_configs.items())
    table.add_row("pass configs", Text(configs or "(none)"))
    table.add_row("target", Text(f"{run.target}  ({run.target_detail})" if run.target_detail else run.target))
    table.add_row("tilelang", Text(run.tilelang_version or "?"))
    status_style = {"ok": "green", "failed": "bold red"}.get(run.status, "yellow")
    table.add_row("status", Text(run.status, style=status_style))
    failed = next((p for p in run.passes if p.failed), None)
    if run.status != "ok":
        where = f"in {failed.name}" if failed else "before its first pass (building the kernel)"
        table.add_row("failed", Text(where, style="red"))
    if run.error:
        table.add_row("error", Text(run.error, style="red"))
    table.add_row("passes", f"{len(run.passes)} ({sum(p.changed for p in run.passes)} changed the IR)")
    if run.total_s is not None:
        table.add_row("lowering", format_ms(run.total_s))
    if run.resources:
        source = trace.kernel_source(run)
        table.add_row("resources", Text("\n".join(resource_lines(run.resources, source))))
    if run.bench is not None:
        style = "red" if run.bench.latency_ms is None else ""
        table.add_row("latency", Text(latency_text(run.bench), style=style))
    host = run.host or {}
    if host:
        table.add_row("recorded on", Text(", ".join(f"{k} {v}" for k, v in host.items())))
    name = Path(trace.path).name if trace.path else "(in memory)"
    table.add_row("trace", Text(f"{name}, created {trace.created}"))
    return table


def legend() -> Text:
    """What the code pane's own colours mean."""
    text = Text("colours in the code pane\n", style="bold")
    for category in CATEGORIES:
        text.append("  ■ ", style=category.colour)
        text.append(category.title + "\n")
    text.append("  + inserted  - deleted  ~ only re-indented  ", style="dim")
    text.append("L31", style="#5f87af")
    text.append(" source line an IR line came from", style="dim")
    return text


class RunInfo(VerticalScroll):
    """The facts of the selected run, shown in place of the code pane (key ``r``)."""

    DEFAULT_CSS = """
    RunInfo { height: 1fr; padding: 0 1; background: $surface; }
    RunInfo #run-notice { color: $warning; text-style: bold; margin-bottom: 1; }
    RunInfo #run-legend { margin-top: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="run-notice")
        yield Static(id="run-facts")
        yield Static(legend(), id="run-legend")

    _shown: tuple[str | None, Table | None] = (None, None)

    def show_run(self, trace: Trace, run: KernelRun) -> None:
        notice = run_notice(trace, run)
        facts = run_facts(trace, run)
        self._shown = (notice, facts)
        note = self.query_one("#run-notice", Static)
        note.update(notice or "")
        note.display = notice is not None
        self.query_one("#run-facts", Static).update(facts)

    @property
    def text(self) -> str:
        """What the pane says, as plain text (for tests)."""
        import io

        from rich.console import Console

        console = Console(width=200, record=True, file=io.StringIO())
        notice, facts = self._shown
        for part in (notice, facts, legend()):
            if part is not None:
                console.print(part)
        return console.export_text()
