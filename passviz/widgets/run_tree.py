"""The tree of traces, kernels and targets; choosing a target posts ``RunChosen``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from irtrace.trace.model import Trace
from passviz.model import run_label
from passviz.widgets.messages import RunChosen

RunRef = tuple[int, int]
"""(trace number, run id)."""


class RunTree(Tree[RunRef | None]):
    """Kernels under each trace, targets under each kernel; a failed run is marked ✗."""

    DEFAULT_CSS = """
    RunTree { height: auto; max-height: 40%; }
    """

    def __init__(self, traces: Sequence[Trace], *, id: str | None = None) -> None:
        super().__init__("traces", id=id)
        self.show_root = False
        self.traces = traces
        self._run_nodes: dict[RunRef, TreeNode[RunRef | None]] = {}

    def on_mount(self) -> None:
        for trace_no, trace in enumerate(self.traces):
            name = Path(trace.path).name if trace.path else "trace"
            parent = self.root
            if len(self.traces) > 1:
                parent = self.root.add(Text(("compare: " if trace_no else "") + name), expand=True)
            for kernel in trace.kernels():
                node = parent.add(Text(kernel), expand=True)  # Text: a name is not Rich markup
                for run in trace.runs:
                    if run.kernel == kernel:
                        label = Text(run_label(run), style="red" if run.status == "failed" else "")
                        self._run_nodes[(trace_no, run.run_id)] = node.add_leaf(
                            label, data=(trace_no, run.run_id)
                        )

    def mark(self, ref: RunRef) -> None:
        """Move the cursor onto a run without posting ``RunChosen`` (the app already switched)."""
        node = self._run_nodes.get(ref)
        if node is not None:
            self.move_cursor(node)

    def on_tree_node_selected(self, event: Tree.NodeSelected[RunRef | None]) -> None:
        event.stop()
        if event.node.data is not None:
            self.post_message(RunChosen(*event.node.data))
