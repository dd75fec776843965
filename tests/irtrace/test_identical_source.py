"""Tracing must not change compilation: the traced kernel source equals untraced `tilelang.lower`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from irtrace.api import prepare_request
from irtrace.manifest import load_manifest
from irtrace.recorder import record_lowering
from irtrace.targets import resolve_targets
from irtrace.trace import STATUS_OK, TraceWriter, text_sha256

from ..conftest import EXAMPLES, ROOT

MANIFEST = EXAMPLES / "irtrace.toml"

# Each kernel is built anew for each lowering: lowering renames some variables of its input
# PrimFunc in place, so lowering one PrimFunc object twice can name them differently.
_UNTRACED = """
import json, sys
import tilelang, tvm
from irtrace.api import prepare_request
from irtrace.manifest import load_manifest

sources = {}
for request in load_manifest(sys.argv[1]):
    for prepared in prepare_request(request):
        if prepared.built is None:
            continue
        with tvm.transform.PassContext(opt_level=3, config=prepared.pass_configs), prepared.tvm_target:
            artifact = tilelang.lower(prepared.built.func, target=prepared.tvm_target)
        sources[request.spec.text + "|" + prepared.target.name] = artifact.kernel_source
print(json.dumps(sources))
"""


def manifest_cases() -> list[tuple[str, str]]:
    """(spec, target) for every example and target in the bundled manifest."""
    cases = []
    for request in load_manifest(MANIFEST):
        for target in request.targets:
            names = [target]
            if target == "all":
                dialect = "ascend" if "ascend" in request.spec.path else "tilelang"
                names = [t.name for t in resolve_targets(["all"], dialect)]
            cases += [(request.spec.text, name) for name in names]
    return cases


@pytest.fixture(scope="module")
def untraced_sources() -> dict[str, str]:
    """Kernel source of every manifest case from a plain ``tilelang.lower`` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _UNTRACED, str(MANIFEST)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    sources: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return sources


@pytest.mark.parametrize(("spec_text", "target_name"), manifest_cases())
def test_traced_source_is_byte_identical(
    spec_text: str, target_name: str, untraced_sources: dict[str, str]
) -> None:
    untraced = untraced_sources[f"{spec_text}|{target_name}"]
    (request,) = [r for r in load_manifest(MANIFEST) if r.spec.text == spec_text]
    prepared = next(p for p in prepare_request(request) if p.target.name == target_name)
    assert prepared.built is not None, prepared.error
    with TraceWriter() as writer:
        result = record_lowering(
            prepared.built.func,
            prepared.target,
            writer,
            kernel=prepared.name,
            pass_configs=prepared.pass_configs,
            tvm_target=prepared.tvm_target,
        )
    assert result.run.status == STATUS_OK, result.run.error
    assert result.kernel_source == untraced
    assert result.run.source_sha256 == text_sha256(untraced)
    assert writer.trace().kernel_source(result.run) == untraced
