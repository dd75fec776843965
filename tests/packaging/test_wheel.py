"""The wheel and sdist users get: built from a copy of the source, checked, listed, and installed.

The install test is what a user does: a fresh ``python -m venv`` that already has torch and
TileLang 0.1.14, then ``pip install tilelang-devtools`` (this wheel, by name), which must change
neither; the installed ``irtrace`` (not this checkout) then records a bundled example, and its
kernel source is checked against a plain ``tilelang.lower`` in the same environment.
Slow (a venv, torch and TileLang): marked ``packaging``, run by ``make test-wheel`` and its own CI job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.packaging

PACKAGES = ("irtrace", "passdiff", "passviz", "tilelang_lsp", "tilelang_mcp")
STARTUP_HOOK = "irtrace-autocapture.pth"
"""``IRTRACE=out.jsonl`` capture's startup hook: ``setup.py`` puts it at the top of the wheel."""
TOP_FILES = (
    "pyproject.toml",
    "setup.py",
    STARTUP_HOOK,
    "MANIFEST.in",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
)
TORCH = "torch==2.13.0"
"""The torch `make setup` installs; ``TORCH_INDEX_URL`` (CI) points pip at a CPU build of it."""
TILELANG = "tilelang==0.1.14"
"""Not the newest release on purpose: the install must keep an older supported TileLang as it is."""
GEMM = f"{EXAMPLES / 'gemm.py'}::matmul(256, 256, 256)"

# The oracle: TileLang's own lowering of the same kernel, with no instrument, in the same venv.
_UNTRACED_SOURCE = """
import hashlib, importlib.util, sys
spec = importlib.util.spec_from_file_location("gemm_example", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import tilelang, tvm
from tilelang.backend.target import determine_target
target = determine_target({"kind": "cuda", "arch": "sm_90"}, return_object=True)
with tvm.transform.PassContext(opt_level=3), target:
    source = tilelang.lower(module.matmul(256, 256, 256), target=target).kernel_source
print(hashlib.sha256(source.encode()).hexdigest())
"""


def copy_source(destination: Path) -> Path:
    """What the sdist is built from, copied so that building writes nothing into the checkout."""
    for name in TOP_FILES:
        shutil.copy2(ROOT / name, destination / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, destination / package, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel built from it, as ``python -m build`` makes them."""
    source = copy_source(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "-o", str(out), str(source)], check=True, capture_output=True
    )
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_twine_check_passes(dist: dict[str, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist["wheel"]), str(dist["sdist"])],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_wheel_holds_the_packages_and_their_data_and_nothing_else(dist: dict[str, Path]) -> None:
    names = zipfile.ZipFile(dist["wheel"]).namelist()
    roots = {name.split("/")[0] for name in names}
    assert roots == {*PACKAGES, STARTUP_HOOK, next(r for r in roots if r.endswith(".dist-info"))}
    # the hook installs into site-packages itself, where Python runs .pth files, as it is in the source
    assert zipfile.ZipFile(dist["wheel"]).read(STARTUP_HOOK) == (ROOT / STARTUP_HOOK).read_bytes()
    tracked = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    # every source file and every style sheet (passviz's *.tcss) is in; no bytecode, no outputs
    assert tracked <= set(names), sorted(tracked - set(names))
    assert {n for n in names if n.endswith(".tcss")} == {n for n in tracked if n.endswith(".tcss")} != set()
    assert not [n for n in names if n.endswith((".pyc", ".jsonl", ".jsonl.gz", ".html", ".svg"))]
    metadata = (
        zipfile.ZipFile(dist["wheel"])
        .read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        .decode()
    )
    (requirement,) = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: tilelang")]
    assert "<" in requirement and ">=" in requirement, requirement  # a tested range, not one release
    entry_points = (
        zipfile.ZipFile(dist["wheel"])
        .read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    for tool in ("irtrace", "passdiff", "passviz", "tilelang-lsp", "tilelang-mcp"):
        assert f"{tool} = " in entry_points


def test_sdist_holds_no_tests_and_no_outputs(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    tops = {name.split("/")[0] for name in names}
    assert not tops & {"tests", "examples", "editors", "docs", "bench", "ci", "out", ".venv", "build"}
    assert {"pyproject.toml", "setup.py", STARTUP_HOOK, "README.md", "LICENSE", *PACKAGES} <= tops
    assert "passviz/app.tcss" in names
    assert not [n for n in names if n.endswith((".pyc", ".jsonl", ".jsonl.gz"))]


OUTSIDE = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
"""The environment without what would put this checkout (or the metadata a build left in it,
``*.egg-info``) on the venv's path; the venv's commands also run outside the checkout."""


def _pip(venv: Path, *args: str) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *args],
        cwd=venv,
        env=OUTSIDE,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"pip install {' '.join(args)} failed:\n{done.stderr[-3000:]}"


def _freeze(venv: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        cwd=venv,
        env=OUTSIDE,
        capture_output=True,
        text=True,
        check=True,
    )
    return {item["name"].lower(): item["version"] for item in json.loads(done.stdout)}


def test_pip_install_into_an_env_with_tilelang_and_torch_changes_neither(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=OUTSIDE, check=True)
    index = os.environ.get("TORCH_INDEX_URL")
    _pip(venv, TORCH, *(["--index-url", index] if index else []))
    _pip(venv, TILELANG)
    before = _freeze(venv)

    _pip(venv, "--find-links", str(dist["wheel"].parent), "tilelang-devtools")
    after = _freeze(venv)
    assert after["tilelang-devtools"] == dist["wheel"].name.split("-")[1]
    changed = {
        name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version
    }
    assert not changed, f"installing tilelang-devtools changed packages already there: {changed}"

    # The venv's own irtrace, run outside the checkout, so nothing is imported from here.
    work = tmp_path / "work"
    work.mkdir()
    env = OUTSIDE
    recorded = subprocess.run(
        [str(venv / "bin" / "irtrace"), "record", GEMM, "-t", "cuda:sm_90", "-o", "gemm.jsonl", "-q"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert recorded.returncode == 0, recorded.stderr
    shown = subprocess.run(
        [str(venv / "bin" / "irtrace"), "show", "gemm.jsonl", "--json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    (run,) = json.loads(shown.stdout)["runs"]
    assert (run["status"], run["target"], run["tilelang_version"]) == ("ok", "cuda:sm_90", "0.1.14")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import irtrace; print(irtrace.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv)

    untraced = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _UNTRACED_SOURCE, str(EXAMPLES / "gemm.py")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run["source_sha256"] == untraced.stdout.strip().splitlines()[-1]

    # The installed startup hook: unset, a Python process imports nothing of irtrace; with
    # IRTRACE set, the same oracle script is captured with no wrapper command, the same source.
    imports = "import sys; print('irtrace' in sys.modules)"
    for value, imported in ((None, "False"), ("captured.jsonl", "True")):
        hooked = {**env, "IRTRACE": value} if value else {k: v for k, v in env.items() if k != "IRTRACE"}
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", imports],
            cwd=work,
            env=hooked,
            capture_output=True,
            text=True,
        )
        assert (done.returncode, done.stdout.strip()) == (0, imported), done.stderr
    captured = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _UNTRACED_SOURCE, str(EXAMPLES / "gemm.py")],
        cwd=work,
        env={**env, "IRTRACE": "captured.jsonl"},
        capture_output=True,
        text=True,
    )
    assert captured.returncode == 0, captured.stderr
    shown = subprocess.run(
        [str(venv / "bin" / "irtrace"), "show", "captured.jsonl", "--json"],
        cwd=work,
        env={k: v for k, v in env.items() if k != "IRTRACE"},
        capture_output=True,
        text=True,
        check=True,
    )
    (run,) = json.loads(shown.stdout)["runs"]
    assert (run["status"], run["target"]) == ("ok", "cuda:sm_90")
    assert (
        run["source_sha256"]
        == captured.stdout.strip().splitlines()[-1]
        == untraced.stdout.strip().splitlines()[-1]
    )


def test_an_editable_install_into_a_fresh_venv_captures_with_irtrace_set(tmp_path: Path) -> None:
    """``pip install -e .`` (any, not only ``make setup``'s) puts the startup hook in the new venv's
    site-packages, listed in its RECORD so that uninstalling removes it. The venv borrows the
    dependencies from this test's environment (a path entry, which runs none of its ``.pth``
    files); the capture's oracle is the kernel source's hash the script printed."""
    (tmp_path / "source").mkdir()
    source = copy_source(tmp_path / "source")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=OUTSIDE, check=True)
    _pip(venv, "--no-deps", "-e", str(source))
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        env=OUTSIDE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site_packages = Path(purelib)
    assert (site_packages / STARTUP_HOOK).read_bytes() == (ROOT / STARTUP_HOOK).read_bytes()
    (record,) = site_packages.glob("tilelang_devtools-*.dist-info/RECORD")
    assert f"{STARTUP_HOOK}," in record.read_text()
    (site_packages / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "work"
    work.mkdir()
    captured = subprocess.run(
        [str(python), "-c", _UNTRACED_SOURCE, str(EXAMPLES / "gemm.py")],
        cwd=work,
        env={**OUTSIDE, "IRTRACE": "captured.jsonl"},
        capture_output=True,
        text=True,
    )
    assert captured.returncode == 0, captured.stderr
    shown = subprocess.run(
        [str(venv / "bin" / "irtrace"), "show", "captured.jsonl", "--json"],
        cwd=work,
        env=OUTSIDE,
        capture_output=True,
        text=True,
        check=True,
    )
    (run,) = json.loads(shown.stdout)["runs"]
    assert (run["status"], run["source_sha256"]) == ("ok", captured.stdout.strip().splitlines()[-1])
