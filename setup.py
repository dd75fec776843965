"""Only what pyproject.toml cannot say: ship the startup hook ``irtrace-autocapture.pth``.

A ``.pth`` file works only at the top of site-packages, outside every package, so ``build_py``
copies it to the top of the wheel, and ``editable_wheel`` (``pip install -e .``, what
``make setup`` does) puts it at the top of the editable wheel; installing either puts it there.
It does nothing unless ``IRTRACE`` is set (docs/capture.md).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

STARTUP_HOOK = "irtrace-autocapture.pth"
HOOK_SOURCE = Path(__file__).parent / STARTUP_HOOK


class BuildPyWithStartupHook(build_py):
    """``build_py``, plus the startup hook at the top of the built tree."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(HOOK_SOURCE), str(Path(self.build_lib) / STARTUP_HOOK))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / STARTUP_HOOK)]


class EditableWheelWithStartupHook(editable_wheel):
    """``editable_wheel``, plus the startup hook at the top of the editable wheel.

    The editable wheel holds only ``.pth`` files and finders, never ``build_py``'s tree, so the
    hook must be added where setuptools writes its own top-level ``.pth`` files: the unpacked
    wheel directory it hands to ``_install_namespaces`` before zipping it (setuptools >= 64).
    """

    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        self.copy_file(str(HOOK_SOURCE), str(Path(installation_dir) / STARTUP_HOOK))


setup(cmdclass={"build_py": BuildPyWithStartupHook, "editable_wheel": EditableWheelWithStartupHook})
