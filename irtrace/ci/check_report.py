"""What ``irtrace check`` writes: a terminal summary, Markdown for a CI job summary, JUnit XML
(one test case per kernel x target) and a JSON document (``docs/ci.md`` describes each)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from typing import Any

from irtrace.base.safe_text import xml_safe
from irtrace.ci.check import (
    FAILING,
    LAYOUT_WHERE,
    UNCHANGED,
    CheckReport,
    MetricChange,
    RunCheck,
    TimeChange,
)
from irtrace.ci.perf_gates import PerfCheck
from irtrace.ci.policy import REMOVED
from irtrace.diff.layouts import buffer_document
from irtrace.perf.latency import latency_cell
from irtrace.perf.metrics import METRIC_TITLES
from irtrace.perf.occupancy import Occupancy
from irtrace.targets.backends import TARGETS
from irtrace.trace.resources import format_bytes

JSON_SCHEMA = 1
"""Version of the ``irtrace check --json`` document."""
MARKDOWN_ROWS = 200
"""Rows the Markdown table shows; the JSON document has them all (job summaries are capped at 1 MiB)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _verdict(report: CheckReport) -> str:
    gated = sum(run.gated for run in report.runs)
    return f"{gated} kernel x target pair(s) fail the policy" if gated else "no change fails the policy"


def _counts_text(report: CheckReport) -> str:
    counts = report.counts()
    total = sum(counts.values())
    parts = ", ".join(f"{count} {outcome.replace('_', ' ')}" for outcome, count in counts.items())
    return f"{total} kernel x target pair(s): {parts or 'none'}"


def _policy_text(report: CheckReport) -> str:
    policy = report.policy
    parts = [f"fails on {', '.join(sorted(policy.fail_on)) or 'nothing'}"]
    if policy.total_ratio:
        parts.append(f"total time > {policy.total_ratio:g}x")
    if policy.pass_ratio:
        parts.append(f"pass time > {policy.pass_ratio:g}x")
    parts += [f"{name} +{limit:.0%}" for name, limit in policy.metric_limits.items()]
    perf = policy.perf
    parts.append(
        f"latency +{perf.latency_percent:g}% outside the noise, registers +{perf.registers}, "
        f"spills +{perf.spill_bytes} B, smem +{perf.smem_bytes} B, "
        f"occupancy -{perf.occupancy_points:g} points"
    )
    where = policy.path or "defaults"
    return f"{where} ({'; '.join(parts)})"


def _changed(report: CheckReport) -> list[RunCheck]:
    """Runs worth listing (not those unchanged, nor those failing the same way in both traces),
    the ones that fail the policy first."""
    listed = [
        run for run in report.runs if run.outcome != UNCHANGED and (run.outcome != FAILING or run.findings)
    ]
    return sorted(listed, key=lambda run: not run.gated)


# ----------------------------------------------------------------------------- terminal


def render_text(report: CheckReport) -> str:
    """A plain summary: one line per finding, failing ones marked ``FAIL``."""
    lines = [
        f"irtrace check: {report.new_path} against the baseline {report.baseline_path}",
        _counts_text(report),
        f"policy: {_policy_text(report)}",
    ]
    lines += [f"note: {note}" for note in report.notes]
    for run in _changed(report):
        mark = "FAIL" if run.gated else "    "
        lines.append(f"{mark} {run.title}: {run.outcome.replace('_', ' ')}")
        for finding in run.findings:
            lines.append(f"       {'x' if finding.gated else '-'} {finding.kind}: {_clean(finding.message)}")
    lines.append(f"result: {_verdict(report)} (exit {1 if report.gated else 0})")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- Markdown


def render_markdown(report: CheckReport) -> str:
    """A job summary: the verdict, counts, one table row per changed pair, details below it."""
    icon = "❌" if report.gated else "✅"
    lines = [
        f"## {icon} irtrace check: {_verdict(report)}",
        "",
        f"`{_md(report.new_path)}` against the baseline `{_md(report.baseline_path)}`: "
        f"{_counts_text(report)}.",
        f"Policy: {_md(_policy_text(report))}.",
        "",
    ]
    lines += [f"> **Note:** {_md(note)}" for note in report.notes]
    if report.notes:
        lines.append("")
    listed = _changed(report)
    if not listed:
        lines.append("Every kernel lowers exactly as in the baseline (IR, passes and source).")
        return "\n".join(lines + _perf_section(report)) + "\n"
    lines += [
        "| | kernel | target | change | first changed pass | source | layouts | time | metrics "
        "| performance |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in listed[:MARKDOWN_ROWS]:
        lines.append(
            "| "
            + " | ".join(
                [
                    "❌" if run.gated else "",
                    f"`{_md(run.kernel)}`",
                    f"`{_md(run.target)}`",
                    _md(run.outcome.replace("_", " ")),
                    _first_pass_cell(run),
                    _source_cell(run),
                    _layouts_cell(run),
                    _time_cell(run.total),
                    _md(_metrics_cell(run.metrics)),
                    _md(_perf_cell(run)),
                ]
            )
            + " |"
        )
    if len(listed) > MARKDOWN_ROWS:
        lines.append(f"\n{len(listed) - MARKDOWN_ROWS} more changed pair(s) are in the JSON report.")
    lines += ["", "<details><summary>What changed, pair by pair</summary>", ""]
    for run in listed[:MARKDOWN_ROWS]:
        lines.append(f"**{_md(run.title)}** ({_md(run.outcome.replace('_', ' '))})")
        lines.append("")
        for finding in run.findings:
            mark = "❌ " if finding.gated else ""
            lines.append(f"- {mark}`{finding.kind}`: {_md(_clean(finding.message))}")
        slow = ", ".join(f"`{_md(t.label)}` {_time_text(t)}" for t in run.pass_times)
        if slow:
            lines.append(f"- slowest passes against the baseline: {slow}")
        lines.append("")
    lines.append("</details>")
    return "\n".join(lines + _perf_section(report)) + "\n"


def _first_pass_cell(run: RunCheck) -> str:
    if run.failure is not None:
        return f"fails in `{_md(run.failure.split(':', 1)[0])}`"
    if run.first_changed_pass is None:
        return ""
    return f"`{_md(run.first_changed_pass)}` ({run.first_change})"


def _source_cell(run: RunCheck) -> str:
    if run.source_changed is None:
        return ""
    if not run.source_changed:
        return "same"
    if run.source_lines is None:
        return "changed"
    return f"changed (+{run.source_lines[0]} −{run.source_lines[1]})"


def _layouts_cell(run: RunCheck) -> str:
    """The buffers whose layout differs, by name (the findings below say how)."""
    if not run.layouts:
        return ""
    return "changed: " + ", ".join(f"`{_md(buffer.buffer)}`" for buffer in run.layouts)


def _time_cell(total: TimeChange | None) -> str:
    return "" if total is None else _time_text(total)


def _time_text(change: TimeChange) -> str:
    ratio = "inf" if math.isinf(change.ratio) else f"{change.ratio:.2f}"
    return f"{ratio}x ({change.baseline_s * 1000:.0f} → {change.new_s * 1000:.0f} ms)"


def _metrics_cell(metrics: Iterable[MetricChange]) -> str:
    changed = [m for m in metrics if m.baseline != m.new]
    return ", ".join(f"{METRIC_TITLES[m.name]} {_value(m.baseline)} → {_value(m.new)}" for m in changed)


def _perf_cell(run: RunCheck) -> str:
    """The performance findings in a few words: ``latency +10.8%, registers 28 → 34``."""
    perf = run.perf
    if perf is None:
        return ""
    parts = []
    if perf.latency is not None and perf.comparable is None:
        change = perf.latency.percent
        if not math.isinf(change) and abs(change) >= 0.05:
            parts.append(f"latency {'+' if change > 0 else ''}{change:.1f}%")
    for item in perf.functions:
        old, now = item.baseline, item.new
        if old is None or now is None:
            continue
        for title, before, after in (
            ("registers", old.registers, now.registers),
            ("spills", old.spills, now.spills),
            ("smem", old.smem, now.smem),
        ):
            if before != after:
                parts.append(f"{title} {before} → {after}")
        was, now_at = item.baseline_occupancy, item.new_occupancy
        if was is not None and now_at is not None and was.fraction != now_at.fraction:
            parts.append(f"occupancy {was.fraction:.0%} → {now_at.fraction:.0%}")
    return ", ".join(parts)


PERF_COLUMNS = ("latency", "change", "registers", "spills", "smem", "occupancy")


def _perf_section(report: CheckReport) -> list[str]:
    """Every pair both traces measured: latency and resources before → after, changed or not."""
    measured = [run for run in report.runs if run.perf is not None][:MARKDOWN_ROWS]
    if not measured:
        return []
    lines = [
        "",
        "### Performance: the baseline → the new trace",
        "",
        "Latency is the median with the range of repetitions; resources are the worst kernel function's.",
        "",
        "| | kernel | target | " + " | ".join(PERF_COLUMNS) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in PERF_COLUMNS) + " |",
    ]
    perf_kinds = {"latency", "registers", "spills", "smem", "occupancy"}
    for run in measured:
        assert run.perf is not None
        gated = any(f.gated and f.kind in perf_kinds for f in run.findings)
        cells = _perf_cells(run.perf)
        lines.append(
            f"| {'❌' if gated else ''} | `{_md(run.kernel)}` | `{_md(run.target)}` | "
            + " | ".join(_md(cell) for cell in cells)
            + " |"
        )
    return lines


def _perf_cells(perf: PerfCheck) -> list[str]:
    latency = f"{latency_cell(perf.baseline_bench)} → {latency_cell(perf.new_bench)}"
    change = ""
    if perf.latency is not None:
        percent = perf.latency.percent
        change = "inf" if math.isinf(percent) else f"{'+' if percent > 0 else ''}{percent:.1f}%"
        if perf.comparable is not None:
            change += f" (not compared: {perf.comparable})"
        elif perf.latency.outside_noise is False:
            change += " (within noise)"

    def worst(side: int, pick: str) -> str:
        values = []
        for item in perf.functions:
            resources = item.baseline if side == 0 else item.new
            occupancy = item.baseline_occupancy if side == 0 else item.new_occupancy
            if pick == "occupancy":
                if occupancy is not None:
                    values.append(occupancy.fraction)
            elif resources is not None:
                values.append(getattr(resources, pick))
        if not values:
            return "-"
        if pick == "occupancy":
            return f"{min(values):.0%}"
        if pick == "smem":
            return format_bytes(int(max(values)))
        return str(max(values)) + (" B" if pick == "spills" else "")

    resources = [
        f"{worst(0, name)} → {worst(1, name)}" for name in ("registers", "spills", "smem", "occupancy")
    ]
    return [latency, change, *resources]


def _value(value: int | None) -> str:
    return "-" if value is None else str(value)


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipes, no line breaks, no stray HTML."""
    return _clean(text).replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _clean(text: str) -> str:
    return xml_safe(_ANSI.sub("", text))


def _xml_safe_tree(root: ElementTree.Element) -> None:
    """Every attribute and text in the tree made safe for XML 1.0 (``xml_safe``): names, targets
    and messages come from traces."""
    for element in root.iter():
        for key, value in element.attrib.items():
            element.set(key, xml_safe(value))
        if element.text is not None:
            element.text = xml_safe(element.text)
        if element.tail is not None:
            element.tail = xml_safe(element.tail)


# ----------------------------------------------------------------------------- JUnit


def render_junit(report: CheckReport) -> str:
    """JUnit XML as CI systems read it: one ``testsuite`` per target, one ``testcase`` per kernel.

    A pair the policy fails has a ``failure``; a pair that fails to lower in both traces, or was
    removed without the policy minding, is ``skipped``; other findings are in ``system-out``.
    """
    root = ElementTree.Element("testsuites", name="irtrace check")
    by_target: dict[str, list[RunCheck]] = {}
    for run in report.runs:
        by_target.setdefault(run.target, []).append(run)
    order = list(TARGETS)
    totals = {"tests": 0, "failures": 0, "time": 0.0}
    for target in sorted(by_target, key=lambda t: (order.index(t) if t in order else len(order), t)):
        runs = by_target[target]
        suite = ElementTree.SubElement(root, "testsuite", name=f"irtrace check {target}")
        properties = ElementTree.SubElement(suite, "properties")
        for name, value in (
            ("baseline", report.baseline_path),
            ("new", report.new_path),
            ("policy", report.policy.path or "defaults"),
        ):
            ElementTree.SubElement(properties, "property", name=name, value=_clean(value))
        failures = skipped = 0
        suite_time = 0.0
        for run in runs:
            seconds = run.new.total_s if run.new is not None and run.new.total_s is not None else 0.0
            suite_time += seconds
            case = ElementTree.SubElement(
                suite, "testcase", name=run.kernel, classname=f"irtrace.{target}", time=f"{seconds:.3f}"
            )
            gated = [f for f in run.findings if f.gated]
            if gated:
                failures += 1
                failure = ElementTree.SubElement(
                    case, "failure", message=_clean(gated[0].message)[:1000], type=gated[0].kind
                )
                failure.text = "\n".join(f"{f.kind}: {_clean(f.message)}" for f in gated)
            elif run.outcome in (FAILING, REMOVED):
                skipped += 1
                reason = run.failure if run.outcome == FAILING else "not in the new trace"
                ElementTree.SubElement(
                    case, "skipped", message=_clean(f"{run.outcome.replace('_', ' ')}: {reason}")[:1000]
                )
            others = [f for f in run.findings if not f.gated]
            if others:
                out = ElementTree.SubElement(case, "system-out")
                out.text = "\n".join(f"{f.kind}: {_clean(f.message)}" for f in others)
        suite.set("tests", str(len(runs)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", str(skipped))
        suite.set("time", f"{suite_time:.3f}")
        totals["tests"] += len(runs)
        totals["failures"] += failures
        totals["time"] += suite_time
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("time", f"{totals['time']:.3f}")
    _xml_safe_tree(root)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


# ----------------------------------------------------------------------------- JSON


def report_document(report: CheckReport) -> dict[str, Any]:
    """The whole check as JSON (``docs/ci.md`` documents it)."""
    return {
        "schema": JSON_SCHEMA,
        "baseline": report.baseline_path,
        "new": report.new_path,
        "policy": report.policy.describe(),
        "gated": report.gated,
        "exit_code": 1 if report.gated else 0,
        "counts": report.counts(),
        "notes": list(report.notes),
        "runs": [_run_document(run) for run in report.runs],
    }


def _run_document(run: RunCheck) -> dict[str, Any]:
    return {
        "kernel": run.kernel,
        "target": run.target,
        "outcome": run.outcome,
        "gated": run.gated,
        "baseline_status": run.baseline.status if run.baseline is not None else None,
        "new_status": run.new.status if run.new is not None else None,
        "failure": run.failure,
        "first_changed_pass": run.first_changed_pass,
        "first_change": run.first_change,
        "source_changed": run.source_changed,
        "passes_added": list(run.passes_added),
        "passes_removed": list(run.passes_removed),
        "passes_moved": list(run.passes_moved),
        "total_s": _time_document(run.total),
        "pass_times": [{"pass": t.label, **_time_document(t)} for t in run.pass_times],
        "metrics": {m.name: {"baseline": m.baseline, "new": m.new} for m in run.metrics},
        "layouts": [buffer_document(buffer, *LAYOUT_WHERE) for buffer in run.layouts],
        "layout_note": run.layout_note,
        "perf": _perf_document(run.perf),
        "findings": [{"kind": f.kind, "message": f.message, "gated": f.gated} for f in run.findings],
    }


def _perf_document(perf: PerfCheck | None) -> dict[str, Any] | None:
    if perf is None:
        return None
    latency = perf.latency
    return {
        "baseline_bench": perf.baseline_bench.to_json() if perf.baseline_bench is not None else None,
        "new_bench": perf.new_bench.to_json() if perf.new_bench is not None else None,
        "latency_percent": None
        if latency is None or math.isinf(latency.percent)
        else round(latency.percent, 3),
        "outside_noise": latency.outside_noise if latency is not None else None,
        "not_compared": perf.comparable,
        "functions": [
            {
                "function": item.function,
                "baseline": item.baseline.to_json() if item.baseline is not None else None,
                "new": item.new.to_json() if item.new is not None else None,
                "baseline_occupancy": _occupancy_document(item.baseline_occupancy),
                "new_occupancy": _occupancy_document(item.new_occupancy),
            }
            for item in perf.functions
        ],
    }


def _occupancy_document(found: Occupancy | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "fraction": round(found.fraction, 4),
        "blocks": found.blocks,
        "warps": found.warps,
        "limiter": found.limiter,
    }


def _time_document(change: TimeChange | None) -> dict[str, Any]:
    if change is None:
        return {"baseline": None, "new": None, "ratio": None}
    ratio = None if math.isinf(change.ratio) else round(change.ratio, 4)
    return {"baseline": change.baseline_s, "new": change.new_s, "ratio": ratio}
