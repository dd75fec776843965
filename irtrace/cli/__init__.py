"""The irtrace command line: record/run/show/ir/matrix/schema and the CI commands.

``irtrace`` (the console script) and ``python -m irtrace.cli`` call ``main``.
"""

from irtrace.cli.main import main

__all__ = ["main"]
