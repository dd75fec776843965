"""The pass browser: pick a kernel and target, walk its passes, read the IR and the diff each made.

Only the selected pass's IR or diff is built, and the code pane renders only visible lines, so a
trace with tens of thousands of IR lines per pass stays responsive. Line counts and diffs of very
large IR are computed in worker threads. The selection lives in the pass table's cursor, which
keys move at once, so keys pressed in quick succession each act on the pass the previous one
chose; the panes catch up as messages arrive.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Footer, Header, Input, Tab, Tabs

from irtrace.trace.model import KernelRun, PassRecord, Trace
from irtrace.trace.summary import is_new_stage
from passviz.model import (
    LineCounts,
    PassEntry,
    PassFilter,
    aligned_pass,
    ir_language,
    line_counts,
    next_matching,
    pass_entries,
    run_text_size,
    terminal_view,
)
from passviz.widgets.code_view import CodeView, IrRows, NoteRows, SideBySideRows, UnifiedRows
from passviz.widgets.filter_bar import FilterBar
from passviz.widgets.help_screen import HelpScreen
from passviz.widgets.layout_view import LayoutView
from passviz.widgets.messages import FiltersChanged, PassChosen, RunChosen
from passviz.widgets.pass_header import PassHeader
from passviz.widgets.pass_table import PassTable
from passviz.widgets.run_info import RunInfo, run_notice
from passviz.widgets.run_picker import RunPicker
from passviz.widgets.run_tree import RunRef, RunTree

VIEW_MODES = ("ir", "diff", "side", "other", "run", "layouts")
LARGE_RUN_CHARS = 2_000_000
"""Above this much distinct IR in a run, +/- counts are computed in a worker."""
LARGE_DIFF_CHARS = 400_000
"""Above this much IR before and after a pass, its diff is computed in a worker."""
NARROW = 120
"""Below this many columns the layouts view takes the whole width (the lists come back after)."""

KEYS: tuple[tuple[str, str, str, str, bool], ...] = (
    # (key, action, footer label, help text, shown in the footer)
    ("question_mark", "help", "help", "this key list and the colours", True),
    ("n", "jump('changed', True)", "next changed", "next pass that changed the IR", True),
    ("N", "jump('changed', False)", "prev changed", "previous pass that changed the IR", False),
    ("e", "jump('failed', True)", "next failed", "next failed pass", True),
    ("E", "jump('failed', False)", "prev failed", "previous failed pass", False),
    ("t", "target(1)", "next target", "same kernel on the next target, same pipeline point", True),
    ("T", "target(-1)", "prev target", "same kernel on the previous target, same pipeline point", False),
    ("k", "pick_run", "kernel/target", "pick a kernel and target by typing part of its name", True),
    (
        "o",
        "other_trace",
        "other trace",
        "same kernel, target and pipeline point in the --compare trace",
        False,
    ),
    ("i", "mode('ir')", "IR", "show the IR after the pass", True),
    ("d", "mode('diff')", "diff", "show the pass's diff, unified", True),
    ("s", "mode('side')", "side by side", "show the pass's diff side by side", True),
    (
        "x",
        "mode('other')",
        "vs other",
        "diff this pass's output against the same pass in the --compare trace",
        False,
    ),
    ("r", "mode('run')", "run", "the run: spec, arguments, pass configs, error, cut-short notice", True),
    (
        "l",
        "mode('layouts')",
        "layouts",
        "the run's buffers and inferred layouts after the pass; the picked one's thread or bank grid",
        True,
    ),
    ("w", "write_layout", "layout SVG", "write the picked buffer's layout as SVG beside the trace", False),
    (
        "m",
        "toggle_source",
        "source",
        "the kernel's source beside the IR, IR lines mapped to source lines",
        True,
    ),
    (
        "g",
        "pick_line",
        "source line",
        "pick a line of the kernel (or click it in the source pane): its IR lines are highlighted in "
        "each pass shown (traces recorded with --source-map)",
        False,
    ),
    (
        "f",
        "toggle_full",
        "full width",
        "give the code pane the whole width (again to bring the lists back)",
        True,
    ),
    ("c", "toggle_changed", "changed only", "list only passes that changed the IR (failed ones stay)", False),
    (
        "p",
        "cycle_phase",
        "phase",
        "cycle the phase filter: all, check, lower, finalize, codegen, machine",
        False,
    ),
    ("slash", "search", "search", "search pass names (enter or escape returns to the list)", True),
    ("escape", "escape", "clear", "leave the search box; in the list, clear every filter", False),
    ("tab", "focus_next", "focus", "move between the targets, filters, passes and code panes", False),
    ("q", "quit", "quit", "quit", True),
)
"""Every key of the browser: the bindings, the help screen and docs/passviz.md come from here."""

KEY_NAMES = {"question_mark": "?", "slash": "/"}


def key_help() -> list[tuple[str, str]]:
    """(key as typed, what it does) for the help screen and the docs."""
    rows = [("↑ ↓ PgUp PgDn Home End", "move through the passes, Home/End to the first/last (or click one)")]
    rows += [(KEY_NAMES.get(key, key), text) for key, _, _, text, _ in KEYS]
    return rows


class PassvizApp(App[None]):
    """Browses one trace, optionally next to a second one (``--compare``)."""

    CSS_PATH = "app.tcss"
    TITLE = "passviz"
    # Below 100 columns the lists get a fixed share (app.tcss's .-narrow rules), so the IR keeps half.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (App declares it without ClassVar)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, action, label, show=show) for key, action, label, _, show in KEYS
    ]

    view_mode: reactive[str] = reactive("ir")
    """``ir``, ``diff`` (unified), ``side`` (side by side), ``other`` (against the --compare
    trace), ``run`` (the run's facts) or ``layouts`` (the run's buffers and their layouts)."""
    pass_filter: reactive[PassFilter] = reactive(PassFilter, init=False)
    show_source: reactive[bool] = reactive(False)
    """The kernel's source is shown beside the IR."""
    full_width: reactive[bool] = reactive(False)
    """The lists are hidden and the code pane takes the whole width."""
    picked_line: reactive[int | None] = reactive(None)
    """The line of the kernel's file whose IR lines are highlighted in the pass shown (``g``)."""

    def __init__(self, traces: Sequence[Trace | str | Path], *, show_times: bool = True) -> None:
        super().__init__()
        from irtrace.trace.reader import load_trace

        self.traces = [terminal_view(t if isinstance(t, Trace) else load_trace(t)) for t in traces]
        self.show_times = show_times
        self.run_ref: RunRef | None = None
        self.entries: list[PassEntry] = []
        self._counts: dict[RunRef, LineCounts] = {}
        self._diffs: dict[tuple[Any, ...], Any] = {}
        self._keep_scroll = False
        self._widened = False
        """The lists were hidden for the layouts view, not by ``f``."""
        self._shown: tuple[Any, ...] | None = None
        self._source_cache: dict[RunRef, Any] = {}
        self._maps_cache: dict[RunRef, Any] = {}
        self._count_caches: list[dict[tuple[str, str], tuple[int, int]]] = [{} for _ in self.traces]
        self.sub_title = self._title(0)

    def _title(self, shown: int) -> str:
        """The trace shown first; with --compare, the other one after it (``o`` switches)."""
        names = [Path(t.path).name if t.path else f"trace {n + 1}" for n, t in enumerate(self.traces)]
        others = [name for n, name in enumerate(names) if n != shown]
        return names[shown] + (f"  (o: {', '.join(others)})" if others else "")

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield RunTree(self.traces, id="runs")
                yield FilterBar(id="filters")
                yield PassTable(show_times=self.show_times, id="passes")
            with Vertical(id="right"):
                yield PassHeader(id="pass-header")
                tabs = [
                    Tab("IR after", id="ir"),
                    Tab("Diff", id="diff"),
                    Tab("Side by side", id="side"),
                    Tab("vs other trace", id="other"),
                    Tab("Run", id="run"),
                    Tab("Layouts", id="layouts"),
                ]
                yield Tabs(*tabs, id="modes")
                with Horizontal(id="panes"):
                    yield CodeView(id="code")
                    yield RunInfo(id="run-info")
                    yield LayoutView(id="layouts")
                    yield CodeView(id="source")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#run-info").display = False
        self.query_one(LayoutView).display = False
        self.query_one("#source").display = False
        if len(self.traces) < 2:
            self.query_one(Tabs).hide("other")
        runs = self.traces[0].runs if self.traces else ()
        if runs:
            self.open_run((0, runs[0].run_id))
        self.query_one(PassTable).focus()

    # ------------------------------------------------------------------ state for callers and tests

    def run_for(self, ref: RunRef) -> KernelRun:
        trace = self.traces[ref[0]]
        return next(run for run in trace.runs if run.run_id == ref[1])

    @property
    def trace(self) -> Trace:
        return self.traces[self.run_ref[0] if self.run_ref else 0]

    @property
    def current_run(self) -> KernelRun | None:
        return self.run_for(self.run_ref) if self.run_ref else None

    @property
    def selected(self) -> int | None:
        """``PassRecord.index`` of the pass under the table's cursor (``None`` when none is listed)."""
        return self.query_one(PassTable).selected_index

    @property
    def selected_entry(self) -> PassEntry | None:
        selected = self.selected
        return next((e for e in self.entries if e.index == selected), None)

    @property
    def selected_record(self) -> PassRecord | None:
        entry = self.selected_entry
        return entry.record if entry else None

    @property
    def visible_entries(self) -> list[PassEntry]:
        return self.query_one(PassTable).entries

    # ------------------------------------------------------------------ switching runs and passes

    def open_run(self, ref: RunRef, keep: tuple[KernelRun, PassRecord] | None = None) -> None:
        """Show a run; ``keep`` is the run and pass shown before, to select the aligned pass."""
        run = self.run_for(ref)
        self.run_ref = ref
        self.sub_title = self._title(ref[0])
        self.entries = pass_entries(run)
        target: PassRecord | None = None
        if keep is not None:
            target = aligned_pass(keep[0], keep[1], run)
            self._keep_scroll = target is not None and target.name == keep[1].name
        elif run.status == "failed":
            target = next((p for p in run.passes if p.failed), None)
        counts = self._counts.get(ref)
        if counts is None:
            if run_text_size(self.trace, run) <= LARGE_RUN_CHARS:
                counts = self._counts[ref] = line_counts(self.trace, run, self._count_caches[ref[0]])
            else:
                self._count_lines(ref, self.trace, run)
        self._fill_table(target.index if target else None, counts)
        self.query_one(RunTree).mark(ref)
        if self.view_mode == "run" or not run.passes:
            self._show_code()

    def _fill_table(self, wanted: int | None, counts: LineCounts | None) -> None:
        visible = [e for e in self.entries if self.pass_filter.admits(e.record)]
        select = None
        if visible:
            if wanted is None:
                select = visible[0].index
            else:
                earlier = [e.index for e in visible if e.index <= wanted]
                select = earlier[-1] if earlier else visible[0].index
        table = self.query_one(PassTable)
        table.show_entries(visible, counts, select)
        if not visible:
            self._show_code()

    @work(thread=True, exclusive=True, group="counts")
    def _count_lines(self, ref: RunRef, trace: Trace, run: KernelRun) -> None:
        """Counts of a large run. A diff of IR of tens of thousands of lines takes up to a second
        of CPU, which in a thread would hold the interpreter lock against the screen; a second
        process does the diffs, this thread only hands the texts over and waits."""
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        from textual.worker import get_current_worker

        # loaded before the fork, so the child imports nothing
        from irtrace.diff import count_line_changes

        worker = get_current_worker()
        counts: LineCounts = {p.index: None if is_new_stage(p) else (0, 0) for p in run.passes}
        # the rule of irtrace.trace.summary.line_changes, with the counting in another process
        todo = [
            p
            for p in run.passes
            if p.changed
            and not is_new_stage(p)
            and p.ir_after is not None
            and p.ir_before not in (None, p.ir_after)
        ]
        # fork: the child has passdiff loaded already (spawn cannot start under every terminal
        # setup Textual makes); it only computes and returns two integers per pass.
        context = multiprocessing.get_context("fork")
        # At the lowest priority, so on a busy machine the screen keeps the CPU it needs.
        with ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=os.nice, initargs=(19,)
        ) as pool:
            futures = {
                record.index: pool.submit(
                    count_line_changes, trace.text(record.ir_before), trace.text(record.ir_after)
                )
                for record in todo
            }
            for index, future in futures.items():
                if worker.is_cancelled:
                    pool.shutdown(wait=False, cancel_futures=True)
                    return
                counts[index] = future.result()
        self.call_from_thread(self._counts_ready, ref, counts)

    def _counts_ready(self, ref: RunRef, counts: LineCounts) -> None:
        self._counts[ref] = counts
        if ref == self.run_ref:
            self.query_one(PassTable).update_counts(counts)
            self._show_header()

    def on_run_chosen(self, message: RunChosen) -> None:
        self._switch_to((message.trace_no, message.run_id))

    def _switch_to(self, ref: RunRef) -> None:
        if ref == self.run_ref:
            return
        keep = (self.current_run, self.selected_record) if self.current_run and self.selected_record else None
        self.open_run(ref, keep)  # type: ignore[arg-type]
        if not self.full_width:
            self.query_one(PassTable).focus()

    def on_pass_chosen(self, message: PassChosen) -> None:
        self._show_code()

    def on_filters_changed(self, message: FiltersChanged) -> None:
        self.pass_filter = PassFilter(message.changed_only, message.name, message.phase)

    def watch_pass_filter(self) -> None:
        if self.run_ref is not None:
            self._keep_scroll = True
            self._fill_table(self.selected, self._counts.get(self.run_ref))

    def watch_view_mode(self, mode: str) -> None:
        self.query_one(Tabs).active = mode
        self._show_code()
        layouts = self.query_one(LayoutView)
        if mode == "layouts":
            if not self.full_width and self.size.width < NARROW:
                self._widened = self.full_width = True  # a grid in a third of 80 columns says little
            layouts.table.focus()  # arrows pick a buffer; tab moves on to the grid and the passes
        elif self._widened:
            self._widened = self.full_width = False
        elif self.focused is not None and layouts in self.focused.ancestors:
            self.query_one(PassTable).focus()

    def watch_show_source(self, shown: bool) -> None:
        self.query_one("#source").display = shown and self.view_mode not in ("run", "layouts")
        self._shown = None
        self._show_code()

    def watch_full_width(self, full: bool) -> None:
        self.query_one("#left").display = not full
        if full and self.view_mode == "layouts":
            self.query_one(LayoutView).table.focus()
        elif full:
            self.query_one("#code", CodeView).focus()
        else:
            self.query_one(PassTable).focus()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab is not None and event.tab.id in VIEW_MODES:
            self.view_mode = event.tab.id

    # ------------------------------------------------------------------ the right-hand panes

    def _show_header(self, note: str = "") -> None:
        run = self.current_run
        if run is None:
            return
        counts = self._counts.get(self.run_ref or (0, 0), {}).get(
            self.selected if self.selected is not None else -1
        )
        notice = run_notice(self.trace, run)
        self.query_one(PassHeader).show_pass(
            run, self.selected_entry, counts, show_times=self.show_times, note=note or notice or ""
        )

    def _show_code(self) -> None:
        code = self.query_one("#code", CodeView)
        info = self.query_one(RunInfo)
        run = self.current_run
        record = self.selected_record
        running_info = self.view_mode == "run"
        layouts = self.query_one(LayoutView)
        layouts.display = self.view_mode == "layouts"
        code.display = not running_info and not layouts.display
        info.display = running_info
        self.query_one("#source").display = self.show_source and code.display
        shown = (self.run_ref, record.index if record else None, self.view_mode, self.show_source)
        if shown == self._shown and not running_info:
            return  # several messages for one move: the panes already show it
        self._shown = shown
        keep_scroll, self._keep_scroll = self._keep_scroll, False
        self._show_header()
        if running_info or layouts.display:
            if run is not None and running_info:
                info.show_run(self.trace, run)
            elif run is not None:
                layouts.show_run(run, self.selected, {e.index: e.label for e in self.entries})
            return
        if record is None:
            if run is not None and not run.passes:
                code.show(NoteRows(*_no_pass_lines(run)))
            else:
                code.show(NoteRows("no pass matches the filters"))
            self._update_source(None)
            return
        language = ir_language(record)
        if self.view_mode == "ir":
            text = self.trace.ir_after(record)
            mapping = None
            if self.show_source and language == "python":
                from passviz.line_marks import gutter

                mapping = gutter(self._origins(record, after=True), text)
            code.show(IrRows(text, mapping), language, keep_scroll=keep_scroll)
            self._mark_picked()
            self._update_source(code)
            return
        self._update_source(None)
        if self.view_mode == "other":
            self._show_other(record, language)
            return
        if record.failed:
            code.show(
                NoteRows(
                    f"{record.name} failed; it made no IR. Its error:",
                    *(record.error or "").splitlines(),
                    "",
                    "The IR it received is under IR after (i).",
                )
            )
            return
        if record.ir_after is None or record.ir_after == record.ir_before:
            code.show(NoteRows(f"{record.name} changed nothing."))
            return
        key = (self.trace.path, record.ir_before, record.ir_after)
        self._diff_for(key, self.trace.ir_before(record), self.trace.ir_after(record), language)

    def _diff_for(self, key: tuple[Any, ...], before: str, after: str, language: str, note: str = "") -> None:
        diff = self._diffs.get(key)
        if diff is not None:
            self._show_diff(diff, language, note)
            return
        if len(before) + len(after) > LARGE_DIFF_CHARS:
            self.query_one("#code", CodeView).show(NoteRows("computing the diff…"))
            self._diff_in_worker(key, before, after, language, note, self._shown)
        else:
            self._diff_ready(key, _diff(before, after), language, note, self._shown)

    @work(thread=True, exclusive=True, group="diff")
    def _diff_in_worker(
        self, key: tuple[Any, ...], before: str, after: str, language: str, note: str, shown: Any
    ) -> None:
        diff = _diff(before, after)
        self.call_from_thread(self._diff_ready, key, diff, language, note, shown)

    def _diff_ready(self, key: tuple[Any, ...], diff: Any, language: str, note: str, shown: Any) -> None:
        if len(self._diffs) > 64:
            self._diffs.clear()
        self._diffs[key] = diff
        if shown == self._shown:
            self._show_diff(diff, language, note)

    def _show_diff(self, diff: Any, language: str, note: str = "") -> None:
        code = self.query_one("#code", CodeView)
        notes = (note,) if note else ()
        if diff.is_empty:
            code.show(
                NoteRows(
                    *notes, "no difference once passdiff's normalization (targets, addresses) is applied."
                )
            )
            return
        if self.view_mode == "side":
            rows: Any = SideBySideRows(diff.side_by_side())
            first = next((i for i, r in enumerate(rows.items) if r.kind != "equal"), 0)
        else:
            rows = UnifiedRows(diff.lines)
            first = next((i for i, line in enumerate(diff.lines) if line.kind != "equal"), 0)
        code.show(rows, language)
        code.scroll_to(y=max(0, first - 3), animate=False, immediate=True)
        if note:
            self._show_header(note)
        if self.view_mode == "diff":
            self._mark_picked()

    # ------------------------------------------------------------------ against the --compare trace

    def other_run(self) -> tuple[int, KernelRun] | None:
        """The same kernel (same target if there) in the other trace."""
        run = self.current_run
        if run is None or self.run_ref is None or len(self.traces) < 2:
            return None
        trace_no = (self.run_ref[0] + 1) % len(self.traces)
        candidates = [r for r in self.traces[trace_no].runs if r.kernel == run.kernel]
        match = next((r for r in candidates if r.target == run.target), None) or next(iter(candidates), None)
        return (trace_no, match) if match is not None else None

    def _show_other(self, record: PassRecord, language: str) -> None:
        code = self.query_one("#code", CodeView)
        run = self.current_run
        found = self.other_run()
        if run is None or found is None:
            why = (
                "open a second trace with --compare to diff a pass against it"
                if len(self.traces) < 2
                else f"{run.kernel if run else 'this kernel'} is not in the other trace"
            )
            code.show(NoteRows(why))
            return
        trace_no, other = found
        from irtrace.diff import align_passes

        row = next(
            (r for r in align_passes(run, other) if r.a is not None and r.a.index == record.index), None
        )
        counterpart = aligned_pass(run, record, other)
        if counterpart is None:
            code.show(NoteRows(f"{other.kernel} on {other.target} in the other trace ran no pass."))
            return
        other_trace = self.traces[trace_no]
        this_name = Path(self.trace.path).name if self.trace.path else "this trace"
        other_name = Path(other_trace.path).name if other_trace.path else "the other trace"
        label_b = row.label_b if row is not None and row.b is not None else None
        if label_b is None:
            note = f"only this run ran it; vs {other_name} after its nearest earlier pass {counterpart.name}"
        else:
            note = f"vs {other_name} ({other.target}): after {label_b}"
        key = ("other", self.trace.path, record.ir_after, other_trace.path, counterpart.ir_after)
        self._diff_for(
            key,
            self.trace.ir_after(record),
            other_trace.ir_after(counterpart),
            language,
            f"{this_name} {note}",
        )

    # ------------------------------------------------------------------ the kernel's source

    def _source(self) -> Any:
        if self.run_ref is None or self.current_run is None:
            return None
        if self.run_ref not in self._source_cache:
            from passviz.source_map import kernel_source

            self._source_cache[self.run_ref] = kernel_source(self.trace, self.current_run)
        return self._source_cache[self.run_ref]

    def _run_maps(self) -> Any:
        """The current run's ``RunLineMaps`` (``None`` when the trace holds no maps for it)."""
        run = self.current_run
        if run is None or self.run_ref is None:
            return None
        if self.run_ref not in self._maps_cache:
            from passviz.line_marks import run_line_maps

            source = self._source()
            self._maps_cache[self.run_ref] = run_line_maps(run, len(source.lines) if source else None)
        return self._maps_cache[self.run_ref]

    def _origins(self, record: PassRecord, *, after: bool) -> dict[int, tuple[int, ...]] | None:
        maps = self._run_maps()
        return None if maps is None else maps.origins(self.trace, record, after=after)  # type: ignore[no-any-return]

    def picked_rows(self) -> frozenset[int] | None:
        """0-based rows of the code pane that print the picked line (IR after the pass, or the
        unified diff); ``None`` when nothing is picked or the view has no map."""
        from passviz.line_marks import rows_of_line

        record, line, code = self.selected_record, self.picked_line, self.query_one("#code", CodeView)
        if record is None or line is None:
            return None
        before = self._origins(record, after=False) if isinstance(code.rows, UnifiedRows) else None
        return rows_of_line(code.rows, line, self._origins(record, after=True), before)

    def _mark_picked(self) -> None:
        """Highlight the picked line's rows in the code pane and say where they are."""
        if self.picked_line is None:
            return
        code = self.query_one("#code", CodeView)
        marked = self.picked_rows()
        if not isinstance(code.rows, IrRows | UnifiedRows):
            return  # side by side, the run, notes: nothing to mark
        if marked is None:
            self._show_header(f"line {self.picked_line}: no source map for this view")
            return
        code.mark(marked, min(marked) if marked else None)
        where = f"rows {', '.join(str(n + 1) for n in sorted(marked)[:12])}" if marked else "no line here"
        self._show_header(f"line {self.picked_line}: {where}")

    def _update_source(self, code: CodeView | None) -> None:
        """Show the kernel's source, marking the lines the IR lines on screen came from."""
        if not self.show_source:
            return
        pane = self.query_one("#source", CodeView)
        source = self._source()
        if source is None:
            pane.show(
                NoteRows(
                    "the trace holds no kernel source",
                    "(recorded before traces kept it, or captured by `irtrace run`)",
                )
            )
            return
        if getattr(pane, "shown_source", None) is not source:
            pane.show(IrRows("\n".join(source.lines)), "python")
            pane.shown_source = source  # type: ignore[attr-defined]
        rows = code.rows if code is not None else None
        picked = frozenset() if self.picked_line is None else frozenset({self.picked_line - 1})
        if not isinstance(rows, IrRows) or rows.source_lines is None or code is None:
            pane.mark(picked)
            return
        on_screen = [rows.source_lines[i] for i in code.visible_rows if rows.source_lines[i] is not None]
        marked = frozenset(n - 1 for n in on_screen if n is not None) | picked
        pane.mark(marked, min(marked) if marked else None)

    def on_code_view_clicked(self, message: CodeView.Clicked) -> None:
        """A click on a line of the source pane picks it."""
        if message.view.id == "source" and self._source() is not None:
            self.pick_line(message.row + 1)

    def pick_line(self, line: int | None) -> None:
        """Highlight ``line``'s IR lines in each pass shown (``None`` stops)."""
        if line is not None and self._run_maps() is None:
            self.notify("this run has no source maps: record it with --source-map", severity="warning")
            return
        self.picked_line = line

    def watch_picked_line(self) -> None:
        self._shown = None
        self._show_code()

    def on_code_view_scrolled(self, message: CodeView.Scrolled) -> None:
        if message.view.id == "code" and self.show_source:
            self._update_source(message.view)

    # ------------------------------------------------------------------ actions

    def action_help(self) -> None:
        self.push_screen(HelpScreen(key_help()))

    def action_jump(self, wanted: str, forward: bool) -> None:
        found = next_matching(self.visible_entries, self.selected, forward, wanted)
        if found is None:
            self.notify(f"no {wanted} pass in this list", severity="warning", timeout=2)
            return
        self.query_one(PassTable).move_to(found.index)

    def action_target(self, step: int) -> None:
        run = self.current_run
        if run is None or self.run_ref is None:
            return
        same_kernel = [r for r in self.trace.runs if r.kernel == run.kernel]
        position = next(i for i, r in enumerate(same_kernel) if r.run_id == run.run_id)
        other = same_kernel[(position + step) % len(same_kernel)]
        if other.run_id != run.run_id:
            self.open_run((self.run_ref[0], other.run_id), self._keep())

    def action_other_trace(self) -> None:
        run = self.current_run
        if run is None or self.run_ref is None or len(self.traces) < 2:
            self.notify("open a second trace with --compare to switch traces", timeout=2)
            return
        found = self.other_run()
        if found is None:
            self.notify(f"{run.kernel} is not in the other trace", severity="warning", timeout=2)
            return
        self.open_run((found[0], found[1].run_id), self._keep())

    def action_pick_run(self) -> None:
        def chosen(ref: RunRef | None) -> None:
            if ref is not None:
                self._switch_to(ref)

        self.push_screen(RunPicker(self.traces, self.run_ref), chosen)

    def _keep(self) -> tuple[KernelRun, PassRecord] | None:
        run, record = self.current_run, self.selected_record
        return (run, record) if run is not None and record is not None else None

    def action_mode(self, mode: str) -> None:
        self.view_mode = mode

    def action_write_layout(self) -> None:
        from irtrace.base.errors import IrtraceError
        from irtrace.base.safe_text import terminal_safe
        from passviz.widgets.layout_view import write_svg

        view, run = self.query_one(LayoutView), self.current_run
        if run is not None:  # the view may still hold the run it showed last
            view.show_run(run, self.selected, {e.index: e.label for e in self.entries})
        layout = view.selected
        if layout is None or run is None:
            self.notify("no layout to write: press l and pick a buffer", severity="warning", timeout=3)
            return
        try:
            path, drawn = write_svg(self.trace, run, layout)
        except (IrtraceError, OSError) as error:
            self.notify(f"layout not written: {error}", severity="error", timeout=6)
            return
        name = terminal_safe(layout.buffer, newlines=False)
        self.notify(f"layout of {name} ({drawn}) written to {path}", timeout=8, markup=False)

    def action_toggle_source(self) -> None:
        # The source shows beside the IR only: from another tab (Run included), m goes to the IR.
        if not self.show_source and self.view_mode != "ir":
            self.view_mode = "ir"
        self.show_source = not self.show_source

    def action_pick_line(self) -> None:
        from passviz.widgets.line_prompt import LinePrompt

        def chosen(line: int | None) -> None:
            if line is not None:  # None: cancelled; CLEAR (0): highlight none
                self.pick_line(line or None)

        self.push_screen(LinePrompt(self.picked_line), chosen)

    def action_toggle_full(self) -> None:
        self._widened = False
        self.full_width = not self.full_width

    def action_toggle_changed(self) -> None:
        self.query_one(FilterBar).toggle_changed()

    def action_cycle_phase(self) -> None:
        self.query_one(FilterBar).cycle_phase()

    def action_search(self) -> None:
        if self.full_width:
            self.full_width = False
        self.query_one(FilterBar).name_input.focus()

    def action_escape(self) -> None:
        if isinstance(self.focused, Input):
            self.query_one(PassTable).focus()
        elif self.pass_filter.active:
            self.query_one(FilterBar).clear()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(PassTable).focus()


def _no_pass_lines(run: KernelRun) -> list[str]:
    """What the code pane says for a run without passes: it failed before its pipeline."""
    if run.status == "ok":
        return [f"{run.kernel} on {run.target} recorded no pass."]
    lines = [
        f"{run.kernel} on {run.target} {run.status} before its first pass (building the kernel):",
        "",
        *(run.error or "(no error recorded)").splitlines(),
        "",
        f"spec: {run.spec}",
        "r shows the run's arguments and pass configs.",
    ]
    return lines


def _diff(before: str, after: str) -> Any:
    from irtrace.diff import NormalizeRules, diff_texts

    return diff_texts(before, after, NormalizeRules())
