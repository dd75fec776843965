"""The pass browser: pick a kernel and target, walk its passes, read the IR and the diff each made.

Only the selected pass's IR or diff is built, and the code pane renders only visible lines, so a
trace with tens of thousands of IR lines per pass stays responsive. Line counts and diffs of very
large IR are computed in worker threads.
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

from irtrace.trace import KernelRun, PassRecord, Trace
from passviz.model import (
    PassEntry,
    PassFilter,
    aligned_pass,
    ir_language,
    line_counts,
    next_matching,
    pass_entries,
    run_text_size,
)
from passviz.widgets.code_view import CodeView, IrRows, NoteRows, SideBySideRows, UnifiedRows
from passviz.widgets.filter_bar import FilterBar
from passviz.widgets.help_screen import HelpScreen
from passviz.widgets.messages import FiltersChanged, PassChosen, RunChosen
from passviz.widgets.pass_header import PassHeader
from passviz.widgets.pass_table import PassTable
from passviz.widgets.run_tree import RunRef, RunTree

VIEW_MODES = ("ir", "diff", "side")
LARGE_RUN_CHARS = 2_000_000
"""Above this much distinct IR in a run, +/- counts are computed in a worker."""
LARGE_DIFF_CHARS = 400_000
"""Above this much IR before and after a pass, its diff is computed in a worker."""

KEYS: tuple[tuple[str, str, str, str, bool], ...] = (
    # (key, action, footer label, help text, shown in the footer)
    ("question_mark", "help", "help", "this key list", True),
    ("n", "jump('changed', True)", "next changed", "next pass that changed the IR", True),
    ("N", "jump('changed', False)", "prev changed", "previous pass that changed the IR", False),
    ("e", "jump('failed', True)", "next failed", "next failed pass", True),
    ("E", "jump('failed', False)", "prev failed", "previous failed pass", False),
    ("t", "target(1)", "next target", "same kernel on the next target, same pass", True),
    ("T", "target(-1)", "prev target", "same kernel on the previous target, same pass", False),
    ("o", "other_trace", "other trace", "same kernel, target and pass in the --compare trace", False),
    ("i", "mode('ir')", "IR", "show the IR after the pass", True),
    ("d", "mode('diff')", "diff", "show the pass's diff, unified", True),
    ("s", "mode('side')", "side by side", "show the pass's diff side by side", True),
    ("c", "toggle_changed", "changed only", "list only passes that changed the IR (failed ones stay)", True),
    ("p", "cycle_phase", "phase", "cycle the phase filter: all, check, lower, finalize, codegen", False),
    ("slash", "search", "search", "search pass names (enter or escape returns to the list)", True),
    ("escape", "escape", "clear", "leave the search box; in the list, clear every filter", False),
    ("tab", "focus_next", "focus", "move between the targets, filters, passes and code panes", False),
    ("q", "quit", "quit", "quit", True),
)
"""Every key of the browser: the bindings, the help screen and docs/passviz.md come from here."""

KEY_NAMES = {"question_mark": "?", "slash": "/"}


def key_help() -> list[tuple[str, str]]:
    """(key as typed, what it does) for the help screen and the docs."""
    rows = [("↑ ↓ PgUp PgDn Home End", "move through the passes (or click one)")]
    rows += [(KEY_NAMES.get(key, key), text) for key, _, _, text, _ in KEYS]
    return rows


class PassvizApp(App[None]):
    """Browses one trace, optionally next to a second one (``--compare``)."""

    CSS_PATH = "app.tcss"
    TITLE = "passviz"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, action, label, show=show) for key, action, label, _, show in KEYS
    ]

    view_mode: reactive[str] = reactive("ir")
    """``ir``, ``diff`` (unified) or ``side`` (side by side)."""
    pass_filter: reactive[PassFilter] = reactive(PassFilter, init=False)

    def __init__(self, traces: Sequence[Trace | str | Path], *, show_times: bool = True) -> None:
        super().__init__()
        from irtrace.trace import load_trace

        self.traces = [t if isinstance(t, Trace) else load_trace(t) for t in traces]
        self.show_times = show_times
        self.run_ref: RunRef | None = None
        self.entries: list[PassEntry] = []
        self.selected: int | None = None
        self._counts: dict[RunRef, dict[int, tuple[int, int]]] = {}
        self._diffs: dict[tuple[int, int, int], Any] = {}
        self._keep_scroll = False
        self.sub_title = "  vs  ".join(Path(t.path).name if t.path else "trace" for t in self.traces)

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
                yield Tabs(
                    Tab("IR after", id="ir"),
                    Tab("Diff", id="diff"),
                    Tab("Side by side", id="side"),
                    id="modes",
                )
                yield CodeView(id="code")
        yield Footer()

    def on_mount(self) -> None:
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
    def selected_entry(self) -> PassEntry | None:
        return next((e for e in self.entries if e.index == self.selected), None)

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
                counts = self._counts[ref] = line_counts(self.trace, run)
            else:
                self._count_lines(ref, self.trace, run)
        self._fill_table(target.index if target else None, counts)
        self.query_one(RunTree).mark(ref)

    def _fill_table(self, wanted: int | None, counts: dict[int, tuple[int, int]] | None) -> None:
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
            self.selected = None
            self._show_code()

    @work(thread=True, exclusive=True, group="counts")
    def _count_lines(self, ref: RunRef, trace: Trace, run: KernelRun) -> None:
        counts = line_counts(trace, run)
        self.call_from_thread(self._counts_ready, ref, counts)

    def _counts_ready(self, ref: RunRef, counts: dict[int, tuple[int, int]]) -> None:
        self._counts[ref] = counts
        if ref == self.run_ref:
            self.query_one(PassTable).update_counts(counts)
            self._show_header()

    def on_run_chosen(self, message: RunChosen) -> None:
        ref = (message.trace_no, message.run_id)
        if ref == self.run_ref:
            return
        keep = (self.current_run, self.selected_record) if self.current_run and self.selected_record else None
        self.open_run(ref, keep)  # type: ignore[arg-type]
        self.query_one(PassTable).focus()

    def on_pass_chosen(self, message: PassChosen) -> None:
        self.selected = message.index
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

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab is not None and event.tab.id in VIEW_MODES:
            self.view_mode = event.tab.id

    # ------------------------------------------------------------------ the right-hand panes

    def _show_header(self, note: str = "") -> None:
        run = self.current_run
        if run is None:
            return
        counts = self._counts.get(self.run_ref or (0, 0), {}).get(self.selected or -1)
        self.query_one(PassHeader).show_pass(
            run, self.selected_entry, counts, show_times=self.show_times, note=note
        )

    def _show_code(self) -> None:
        code = self.query_one(CodeView)
        keep_scroll, self._keep_scroll = self._keep_scroll, False
        record = self.selected_record
        self._show_header()
        if record is None:
            code.show(NoteRows("no pass matches the filters"))
            return
        language = ir_language(record)
        if self.view_mode == "ir":
            code.show(IrRows(self.trace.ir_after(record)), language, keep_scroll=keep_scroll)
            return
        if record.failed:
            code.show(NoteRows(f"{record.name} failed; it made no IR:", *(record.error or "").splitlines()))
            return
        if not record.changed:
            code.show(NoteRows(f"{record.name} changed nothing."))
            return
        key = (self.run_ref[0] if self.run_ref else 0, self.run_ref[1] if self.run_ref else 0, record.index)
        diff = self._diffs.get(key)
        if diff is not None:
            self._show_diff(diff, language)
            return
        before, after = self.trace.ir_before(record), self.trace.ir_after(record)
        if len(before) + len(after) > LARGE_DIFF_CHARS:
            code.show(NoteRows("computing the diff…"))
            self._diff_in_worker(key, before, after, language)
        else:
            self._diff_ready(key, _diff(before, after), language)

    @work(thread=True, exclusive=True, group="diff")
    def _diff_in_worker(self, key: tuple[int, int, int], before: str, after: str, language: str) -> None:
        diff = _diff(before, after)
        self.call_from_thread(self._diff_ready, key, diff, language)

    def _diff_ready(self, key: tuple[int, int, int], diff: Any, language: str) -> None:
        if len(self._diffs) > 64:
            self._diffs.clear()
        self._diffs[key] = diff
        if self.run_ref and key == (*self.run_ref, self.selected) and self.view_mode != "ir":
            self._show_diff(diff, language)

    def _show_diff(self, diff: Any, language: str) -> None:
        code = self.query_one(CodeView)
        if diff.is_empty:
            code.show(NoteRows("the pass changed only what passdiff normalizes away (targets, addresses)."))
            return
        if self.view_mode == "side":
            rows: Any = SideBySideRows(diff.side_by_side())
            first = next((i for i, r in enumerate(rows.items) if r.kind != "equal"), 0)
        else:
            rows = UnifiedRows(diff.lines)
            first = next((i for i, line in enumerate(diff.lines) if line.kind != "equal"), 0)
        code.show(rows, language)
        code.scroll_to(y=max(0, first - 3), animate=False, immediate=True)

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
        trace_no = (self.run_ref[0] + 1) % len(self.traces)
        candidates = [r for r in self.traces[trace_no].runs if r.kernel == run.kernel]
        match = next((r for r in candidates if r.target == run.target), None) or next(iter(candidates), None)
        if match is None:
            self.notify(f"{run.kernel} is not in the other trace", severity="warning", timeout=2)
            return
        self.open_run((trace_no, match.run_id), self._keep())

    def _keep(self) -> tuple[KernelRun, PassRecord] | None:
        run, record = self.current_run, self.selected_record
        return (run, record) if run is not None and record is not None else None

    def action_mode(self, mode: str) -> None:
        self.view_mode = mode

    def action_toggle_changed(self) -> None:
        self.query_one(FilterBar).toggle_changed()

    def action_cycle_phase(self) -> None:
        self.query_one(FilterBar).cycle_phase()

    def action_search(self) -> None:
        self.query_one(FilterBar).name_input.focus()

    def action_escape(self) -> None:
        if isinstance(self.focused, Input):
            self.query_one(PassTable).focus()
        elif self.pass_filter.active:
            self.query_one(FilterBar).clear()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(PassTable).focus()


def _diff(before: str, after: str) -> Any:
    from passdiff import NormalizeRules, diff_texts

    return diff_texts(before, after, NormalizeRules())
