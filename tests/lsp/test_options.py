"""Initialization options decode by type, option by option: a bad value is reported (the option,
the value, what it takes) and its default used; good values beside it are kept."""

from __future__ import annotations

import pytest

from irtrace.targets.backends import TARGETS
from tilelang_lsp.options import InitializationOptions, InlayHintOptions, parse_options


def test_bad_options_fall_back_to_defaults() -> None:
    options, problems = parse_options(
        {
            "trusted": "yes",
            "debounceMs": 40,
            "extraTargets": ["hip", "nope"],
            "inlayHints": {"layout": False, "shape": "no", "colour": True},
            "x": 1,
        }
    )
    assert options == InitializationOptions(debounce_ms=40, inlay_hints=InlayHintOptions(layout=False))
    assert problems[0] == 'option trusted: "yes" is not valid (expected `bool`, got `str`); using false'
    assert problems[1].startswith('option extraTargets: ["hip","nope"] is not valid ("nope" is not a known ')
    assert problems[1].endswith('; using ["hip:gfx942"]')
    assert all(name in problems[1] for name in TARGETS)  # it says what the option takes
    assert (
        problems[2] == 'option inlayHints.shape: "no" is not valid (expected `bool`, got `str`); using true'
    )
    assert (
        problems[3] == 'unknown option "inlayHints.colour" (known: shape, dtype, scope, layout, parameters)'
    )
    assert problems[4].startswith('unknown option "x" (known: trusted, python, defaultTarget, ')
    assert len(problems) == 5
    assert parse_options(None) == (InitializationOptions(), [])


def test_a_value_starting_with_an_exclamation_mark_is_a_value() -> None:
    """The attack: problems were "!"-prefixed strings among the values, so ``"!traces"`` was taken
    for a problem, dropped, and reported as the problem "traces"."""
    options, problems = parse_options({"traceDir": "!traces", "python": "!python3"})
    assert (options.trace_dir, options.python, problems) == ("!traces", "!python3", [])
    options, problems = parse_options({"defaultTarget": "!traces"})
    assert options.default_target == InitializationOptions().default_target
    assert [p.split(" is not valid")[0] for p in problems] == ['option defaultTarget: "!traces"']


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"debounceMs": -1}, "option debounceMs: -1 is not valid (expected `int` >= 0); using 150"),
        (
            {"hint_wait_s": True},
            "option hintWaitS: true is not valid (expected `float`, got `bool`); using 2.0",
        ),
        (
            {"traceDir": ""},
            'option traceDir: "" is not valid (expected `str` of length >= 1); using ".tilelang-lsp"',
        ),
        ({"python": 3}, "option python: 3 is not valid (expected `str | null`, got `int`); using null"),
        ({"inlayHints": [True]}, "option inlayHints: [true] should be an object; using the defaults"),
        (
            {"workerMemoryLimitMb": 1.5},
            "option workerMemoryLimitMb: 1.5 is not valid (expected `int`, got `float`); using 6144",
        ),
    ],
)
def test_each_bad_value_names_the_option_and_what_it_takes(raw: dict[str, object], problem: str) -> None:
    assert parse_options(raw) == (InitializationOptions(), [problem])


def test_options_take_snake_case_and_camel_case_and_keep_good_values_beside_bad_ones() -> None:
    options, problems = parse_options({"analysis_timeout_s": 4, "extraTargets": [], "summary": "off"})
    assert (options.analysis_timeout_s, options.extra_targets, options.summary) == (4.0, (), True)
    assert problems == ['option summary: "off" is not valid (expected `bool`, got `str`); using true']
    assert parse_options(["trusted"]) == (
        InitializationOptions(),
        ["initializationOptions should be an object, got list"],
    )


def test_options_and_directives_take_irtrace_target_names_and_aliases() -> None:
    options, problems = parse_options(
        {"defaultTarget": "cuda:hopper", "extraTargets": ["hip:rdna4", "cpu", "cuda:sm_120", "gfx90a"]}
    )
    assert problems == []
    assert options.default_target == "cuda:sm_90a"
    assert options.extra_targets == ("hip:gfx1201", "c", "cuda:sm_120", "hip:gfx90a")
    assert all(name in TARGETS for name in options.extra_targets)
