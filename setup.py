"""Only what pyproject.toml cannot say: ship the startup hook ``irtrace-autocapture.pth``.

A ``.pth`` file works only at the top of site-packages, outside every package, so ``build_py``
copies it to the top of the wheel; installing the wheel puts it there. It does nothing unless
``IRTRACE`` is set (docs/capture.md).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

STARTUP_HOOK = "irtrace-autocapture.pth"


class BuildPyWithStartupHook(build_py):
    """``build_py``, plus the startup hook at the top of the built tree."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(Path(__file__).parent / STARTUP_HOOK), str(Path(self.build_lib) / STARTUP_HOOK))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / STARTUP_HOOK)]


setup(cmdclass={"build_py": BuildPyWithStartupHook})
