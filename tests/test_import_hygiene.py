"""One core, thin edges: the core imports no UI libraries, and reading traces needs no tilelang."""

from __future__ import annotations

import json
import subprocess
import sys

CORE = [
    "irtrace",
    "irtrace.trace.model",
    "irtrace.targets.backends",
    "irtrace.targets.specs",
    "irtrace.trace.summary",
    "irtrace.base.errors",
    "irtrace.edge.command",
    "irtrace.trace.resources",
    "irtrace.targets.compat",  # reads the installed release from package metadata, without importing it
]
LAZY = [
    "irtrace.lowering.loader",
    "irtrace.lowering.recorder",
    "irtrace.lowering.api",
    "irtrace.lowering.manifest",
    "irtrace.lowering.capture",
    "irtrace.cli",
    "irtrace.lowering.machine_code",
    "irtrace.lowering.bench",
    "irtrace.ci.check",
    "irtrace.ci.check_report",
    "irtrace.perf.metrics",
    "irtrace.ci.policy",
    "irtrace.lowering.executor",
    "irtrace.ci.repro",
]


def imported_roots(modules: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_core_imports_no_ui_and_no_compiler() -> None:
    roots = imported_roots(CORE + LAZY)
    assert not roots & {"textual", "pygls", "lsprotocol", "graphviz", "rich"}
    assert not roots & {"tilelang", "tvm", "torch"}, "trace readers must start fast, without tilelang"


def test_passdiff_library_has_no_terminal_code() -> None:
    roots = imported_roots(["passdiff"])
    assert not roots & {"textual", "pygls", "rich", "tilelang", "tvm"}
