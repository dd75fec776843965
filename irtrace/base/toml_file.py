"""Reading the TOML files a user hands to irtrace (a policy, a manifest): one error line naming the
file for anything wrong with it, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from irtrace.base.errors import InputError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(file: Path, what: str) -> dict[str, Any]:
    """The tables of ``file``; ``what`` names it in errors ("policy file", "manifest").

    A folder is called a folder, not missing; a byte-order mark (saved by some Windows editors)
    is skipped; nesting too deep for the parser is an error naming the file.
    """
    if file.is_dir():
        raise InputError(f"{what} {str(file)!r} is a folder; give the .toml file itself")
    if not file.exists():
        raise InputError(f"{what} {str(file)!r} does not exist")
    if not file.is_file():  # a pipe would block the read for good
        raise InputError(f"{what} {str(file)!r} is not a regular file (a pipe or a device)")
    try:
        return tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{file}: not valid TOML: {error}") from None
    except RecursionError:
        raise UsageError(f"{file}: arrays or tables nested too deeply to read") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {str(file)!r}: {error.strerror or error}") from None
