"""bench/corpus.toml, the regression corpus ``bench/record_scale.py --corpus`` records: over 1,000
real runs, each (kernel, target) once, every bundled example of examples/irtrace.toml in it on
every target of its dialect under each config. Planned here (modules loaded, nothing lowered);
the oracle for "every target" is irtrace's own target list per dialect."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from irtrace.lowering.manifest import load_manifest
from irtrace.targets.backends import dialect_of_source, expand_target
from irtrace.targets.specs import KernelSpec

from ..conftest import EXAMPLES, ROOT

CORPUS = ROOT / "bench" / "corpus.toml"


def _file(spec: KernelSpec, base: Path | None) -> Path:
    return ((base or ROOT) / spec.path).resolve()


def test_the_corpus_plans_over_a_thousand_distinct_runs_of_every_example_on_every_target() -> None:
    requests = load_manifest(CORPUS)
    bundled = {(_file(r.spec, r.base_dir), r.spec.name) for r in load_manifest(EXAMPLES / "irtrace.toml")}
    assert {(_file(r.spec, r.base_dir), r.spec.name) for r in requests} == bundled
    configs = Counter(tuple(sorted(request.pass_configs.items())) for request in requests)
    assert len(configs) == 7 and set(configs.values()) == {len(bundled)}  # each config on every example
    assert len({request.name for request in requests}) == len(requests)  # one name per kernel x config

    runs = 0
    for request in requests:
        assert request.targets == ("all",)
        dialect = dialect_of_source(_file(request.spec, request.base_dir).read_text(encoding="utf-8"))
        runs += len(expand_target("all", dialect))
    assert runs >= 1000
