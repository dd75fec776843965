"""``IRTRACE=out.jsonl``: capture with no wrapper command, through the startup hook.

The hook is the repository's own ``irtrace-autocapture.pth``, run by Python's ``site`` machinery
(``site.addsitedir`` from a ``sitecustomize`` on ``PYTHONPATH``) exactly as from site-packages,
where the wheel installs it (tests/packaging checks that file in the wheel and runs it installed).
Oracles: what TileLang's own lowering gave the programs, printed by the programs themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

import pytest

from irtrace.trace.instances import kernel_instances
from irtrace.trace.model import STATUS_OK, Trace
from irtrace.trace.reader import load_trace
from tests.conftest import DATA, ROOT

HOOK = ROOT / "irtrace-autocapture.pth"
SUITE = DATA / "kernelsuite"
WARNING = "irtrace: warning: "


def hooked_env(
    tmp_path: Path, *, hook: bool = True, checkout: bool = True, **variables: str
) -> dict[str, str]:
    """An environment whose Python processes run the startup hook (every one they start too)."""
    site_dir = tmp_path / ("site" if hook else "site-without-hook")
    boot = tmp_path / "boot"
    site_dir.mkdir(exist_ok=True)
    boot.mkdir(exist_ok=True)
    if hook:
        shutil.copy(HOOK, site_dir / HOOK.name)
    (boot / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site_dir)!r})\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRTRACE") and k != "PYTEST_XDIST_WORKER"}
    env["PYTHONPATH"] = os.pathsep.join([str(boot), *([str(ROOT)] if checkout else [])])
    return {**env, **variables}


def captured_shas(trace: Trace) -> Counter[str]:
    assert all(run.status == STATUS_OK for run in trace.runs), [run.error for run in trace.runs]
    return Counter(run.source_sha256 or "" for run in trace.runs)


# ----------------------------------------------------------------------------- a test suite


# The xdist variant runs with the sweeps (make test stays within 10 minutes); the plain one covers
# the hook in a test suite here.
@pytest.fixture(scope="module", params=["pytest", pytest.param("pytest -n 2", marks=pytest.mark.sweep)])
def suite_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Trace, list[str]]:
    """A kernel library's own test suite run under IRTRACE (plain, then with xdist workers):
    the trace and the oracle lines ``TEST_ID SHA PID`` its tests wrote."""
    tmp_path = tmp_path_factory.mktemp("suite")
    package = tmp_path / "kernelsuite"
    shutil.copytree(SUITE, package)
    oracle = tmp_path / "oracle.tsv"
    command = [
        sys.executable,
        "-m",
        *request.param.split(),
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    done = subprocess.run(
        command,
        cwd=package,
        env=hooked_env(tmp_path, IRTRACE="out.jsonl", KERNELSUITE_ORACLE=str(oracle)),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout
    assert not (package / "out.jsonl.parts").exists()
    lines = oracle.read_text().splitlines()
    processes = len({line.split("\t")[2] for line in lines})  # the pids that lowered, as the tests saw them
    assert f"3 captured run(s) from {processes} process(es)" in done.stderr
    return load_trace(package / "out.jsonl"), lines


def test_a_test_suite_under_irtrace_records_every_kernel_it_lowers(
    suite_run: tuple[Trace, list[str]],
) -> None:
    trace, oracle = suite_run
    assert len(oracle) == 3
    assert captured_shas(trace) == Counter(line.split("\t")[1] for line in oracle)


def test_each_captured_run_names_its_test_and_process(suite_run: tuple[Trace, list[str]]) -> None:
    trace, oracle = suite_run
    expected = Counter(tuple(line.split("\t")) for line in oracle)
    seen = Counter(
        (run.instance.test_id, run.source_sha256, str(run.instance.pid))
        for run in trace.runs
        if run.instance is not None
    )
    assert seen == expected


def test_instances_lists_each_test_of_the_suite_once(suite_run: tuple[Trace, list[str]]) -> None:
    """``irtrace instances``' grouping: one instance per test that lowered a kernel (the oracle's
    test ids), each naming the process the test ran in."""
    trace, oracle = suite_run
    found = kernel_instances(trace.runs)
    assert sorted((i.test_id, i.processes) for i in found) == sorted(
        (test_id, [f"pid {pid}"]) for test_id, _, pid in (line.split("\t") for line in oracle)
    )


# ----------------------------------------------------------------------------- processes


def test_a_script_that_forks_and_uses_a_pool_is_captured_in_every_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(DATA / "forking_script.py"), "fork"],
        cwd=tmp_path,
        env=hooked_env(tmp_path, IRTRACE="out.jsonl"),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lowered = Counter(re.findall(r"^lowered \d+ ([0-9a-f]{64})$", done.stdout, re.MULTILINE))
    assert sum(lowered.values()) == 6
    assert captured_shas(load_trace(tmp_path / "out.jsonl")) == lowered
    # the script, its forked child and the pool's two workers
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(f"6 captured run(s) from 4 process(es) written to {tmp_path / 'out.jsonl'}")
    )
    assert not (tmp_path / "out.jsonl.parts").exists()


@pytest.mark.sweep  # 10-14 s on 2 cores (two processes, a lowering, collect polled): with the sweeps
def test_a_process_outliving_the_first_is_left_in_its_part_and_collected_later(tmp_path: Path) -> None:
    release = tmp_path / "release"
    env = hooked_env(tmp_path, IRTRACE="out.jsonl")
    done = subprocess.run(
        [sys.executable, str(DATA / "outliving_child.py"), str(release)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert done.returncode == 0, done.stderr
        (sha,) = re.findall(r"^lowered ([0-9a-f]{64})$", done.stdout, re.MULTILINE)
        assert not (tmp_path / "out.jsonl").exists()  # the child's part was still being written
        assert len(list((tmp_path / "out.jsonl.parts").glob("*/*.jsonl"))) == 1
        assert "1 process(es) of this session still run" in done.stderr
        assert "irtrace collect" in done.stderr
    finally:
        release.touch()
    collect = [sys.executable, "-m", "irtrace.cli", "collect", "out.jsonl"]
    clean = {k: v for k, v in env.items() if not k.startswith("IRTRACE")}
    for _ in range(200):  # the child ends within a moment of the release
        collected = subprocess.run(collect, cwd=tmp_path, env=clean, capture_output=True, text=True)
        if "collected 1 run(s)" in collected.stdout:
            break
        time.sleep(0.1)
    assert collected.returncode == 0, collected.stderr
    assert captured_shas(load_trace(tmp_path / "out.jsonl")) == Counter([sha])
    assert not (tmp_path / "out.jsonl.parts").exists()
    again = subprocess.run(collect, cwd=tmp_path, env=clean, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.startswith("nothing to collect"), again.stderr
    assert captured_shas(load_trace(tmp_path / "out.jsonl")) == Counter([sha])  # untouched
    (tmp_path / "out.jsonl").unlink()
    neither = subprocess.run(collect, cwd=tmp_path, env=clean, capture_output=True, text=True)
    assert neither.returncode == 3 and "no captured parts" in neither.stderr


# ----------------------------------------------------------------------------- costs nothing unset

MODULES = "import sys; print(sorted(sys.modules))"


@pytest.mark.parametrize("value", [None, ""])
def test_unset_the_hook_imports_nothing(tmp_path: Path, value: str | None) -> None:
    """The hook's whole cost unset is one environment lookup: not one module more is imported
    (bench/autocapture_startup.py measures the time)."""
    extra = {} if value is None else {"IRTRACE": value}
    with_hook = subprocess.run(
        [sys.executable, "-c", MODULES],
        env=hooked_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        check=True,
    )
    without = subprocess.run(
        [sys.executable, "-c", MODULES],
        env=hooked_env(tmp_path, hook=False, **extra),
        capture_output=True,
        text=True,
        check=True,
    )
    assert with_hook.stdout == without.stdout and "irtrace" not in with_hook.stdout
    assert with_hook.stderr == without.stderr == ""


# ----------------------------------------------------------------------------- hostile values

PROGRAM = "print('ran'); raise SystemExit(3)"


def _hostile(tmp_path: Path, kind: str) -> dict[str, str]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("")
    values = {
        "a folder": {"IRTRACE": str(tmp_path / "folder")},
        "a device": {"IRTRACE": os.devnull},
        "below a file": {"IRTRACE": str(tmp_path / "file" / "out.jsonl")},
        "unwritable": {"IRTRACE": "/proc/irtrace/out.jsonl"},
        "a session that escapes": {"IRTRACE": str(tmp_path / "out.jsonl"), "IRTRACE_SESSION": "../../x"},
        "a relative path in a session": {"IRTRACE": "out.jsonl", "IRTRACE_SESSION": "s1"},
    }
    return values[kind]


@pytest.mark.parametrize(
    "kind",
    [
        "a folder",
        "a device",
        "below a file",
        "unwritable",
        "a session that escapes",
        "a relative path in a session",
    ],
)
def test_a_bad_value_warns_once_and_the_program_runs_on_uncaptured(tmp_path: Path, kind: str) -> None:
    variables = _hostile(tmp_path, kind)
    # the program starts a Python child too: one warning in all, not one per process
    program = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass']); " + PROGRAM
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=hooked_env(tmp_path, **variables),
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (3, "ran\n")
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    if kind.startswith("a session") or kind.startswith("a relative"):  # set by hand: each process says so
        assert lines and all(line.startswith(WARNING) for line in lines), done.stderr
    else:
        assert len(lines) == 1 and lines[0].startswith(WARNING) and "runs without capture" in lines[0], (
            done.stderr
        )
    assert not list(tmp_path.glob("**/*.jsonl*"))


def test_without_irtrace_importable_the_hook_warns_and_the_program_runs(tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)  # the interpreter outside this venv
    done = subprocess.run(
        [base, "-c", PROGRAM],
        cwd=tmp_path,
        env=hooked_env(tmp_path, checkout=False, IRTRACE="out.jsonl"),
        capture_output=True,
        text=True,
    )
    if "irtrace cannot be imported" not in done.stderr and done.returncode == 3:
        pytest.skip(f"{base} imports irtrace without this checkout")
    assert (done.returncode, done.stdout) == (3, "ran\n")
    (line,) = done.stderr.splitlines()
    assert line.startswith(WARNING) and "irtrace cannot be imported" in line


# ----------------------------------------------------------------------------- as installed

INSTALLED_SCRIPT = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
import tilelang
from tilelang.backend.target import determine_target
from misbehaving import copy

target = determine_target({"kind": "cuda", "arch": "sm_90a"}, return_object=True)
with target:
    source = tilelang.lower(copy(8192, 128), target=target).kernel_source
print("lowered", hashlib.sha256(source.encode("utf-8")).hexdigest())
"""


def test_the_environment_make_setup_builds_captures_with_nothing_but_irtrace_set(tmp_path: Path) -> None:
    """The README's first step: in the venv ``make setup`` builds (an editable install, this test's
    own interpreter), ``IRTRACE=cap.jsonl python script.py`` captures with no ``PYTHONPATH`` or
    ``sitecustomize`` of the test's: the hook is in that venv's site-packages, where setup.py's
    ``editable_wheel`` put it. Oracle: the kernel source's hash the script printed."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    assert (site_packages / HOOK.name).read_bytes() == HOOK.read_bytes()
    script = tmp_path / "script.py"
    script.write_text(INSTALLED_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IRTRACE", "PYTHON"))}
    done = subprocess.run(
        [sys.executable, str(script), str(DATA)],
        cwd=tmp_path,
        env={**env, "IRTRACE": "cap.jsonl"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (sha,) = re.findall(r"^lowered ([0-9a-f]{64})$", done.stdout, re.MULTILINE)
    trace = load_trace(tmp_path / "cap.jsonl")
    assert captured_shas(trace) == Counter([sha])
    assert [run.kernel for run in trace.runs] == ["copy"]  # named after its factory, as record names it
