"""One or two lines about the selected pass: where it ran, its time, what it changed, its error."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from irtrace.trace.model import KernelRun
from irtrace.trace.summary import NEW_STAGE, is_new_stage
from passviz.model import PassEntry, format_ms


class PassHeader(Static):
    """Names the selected pass; a failed pass shows its error in red."""

    DEFAULT_CSS = """
    PassHeader { height: auto; padding: 0 1; background: $boost; }
    """

    def show_pass(
        self,
        run: KernelRun,
        entry: PassEntry | None,
        counts: tuple[int, int] | None,
        *,
        show_times: bool = True,
        note: str = "",
    ) -> None:
        text = Text()
        text.append(f"{run.kernel} @ {run.target}", style="bold")
        failed = entry.record.failed if entry is not None else bool(not run.passes and run.status != "ok")
        # a narrow screen keeps the header short, except the error of a failed pass: the IR below
        # it is the IR the pass received, and the error is what to read first (app.tcss)
        self.set_class(failed, "-failed")
        if entry is None:
            if not run.passes and run.status != "ok":
                text.append(f"  {run.status.upper()} before its first pass", style="bold white on red")
                if run.error:
                    text.append("\n")
                    text.append(run.error, style="red")
            else:
                text.append("  no pass selected", style="dim")
            if note:
                text.append(f"\n{note}", style="yellow")
            self.update(text)
            return
        record = entry.record
        text.append("  ›  ")
        text.append(entry.label, style="bold red" if record.failed else "bold cyan")
        where = [record.phase, record.pipeline or "", record.scope]
        text.append("  " + " · ".join(x for x in where if x), style="dim")
        if show_times:
            text.append(f"  {format_ms(record.wall_s)} ({entry.share:.0%})")
        if record.failed:
            text.append("  FAILED", style="bold white on red")
        elif is_new_stage(record):
            text.append(f"  {NEW_STAGE}", style="cyan")
        elif record.changed or (counts is not None and counts != (0, 0)):
            text.append("  changed ", style="green")
            if counts is None:
                text.append("…", style="dim")
            else:
                text.append(f"+{counts[0]}", style="green")
                text.append(f" -{counts[1]}", style="red")
        else:
            text.append("  unchanged", style="dim")
        if note:
            text.append(f"  {note}", style="yellow")
        if record.failed and record.error:
            text.append("\n")
            text.append(record.error, style="red")
        self.update(text)
