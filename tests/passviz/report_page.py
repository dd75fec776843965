"""Reading a report page's compressed store in tests, by hand (base64, gzip, JSON): what the
page's script decodes in the browser."""

from __future__ import annotations

import base64
import gzip
import json
import re
from typing import Any


def stored(page: str) -> dict[str, Any]:
    """What a report page stores compressed, decoded here by hand (base64, gzip, JSON)."""

    blob = re.search(r"id='passviz-texts'>([^<]*)</script>", page)
    assert blob
    return json.loads(gzip.decompress(base64.b64decode(blob.group(1))))


def stored_html(page: str) -> list[str]:
    return stored(page)["html"]


def stored_texts(page: str) -> list[str]:
    """The texts a report page stores (runs of numbers of lines each stored once)."""
    data = stored(page)
    lines = data["lines"]
    texts = []
    for runs in data["texts"]:
        numbers = [
            start + k for start, count in zip(runs[::2], runs[1::2], strict=True) for k in range(count)
        ]
        texts.append("\n".join(lines[n] for n in numbers))
    return texts
