"""Reading stored notebooks in tests: cells, their source and their text outputs."""

import base64
import json
import struct
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def cells(name: str) -> list:
    return json.loads((NOTEBOOKS / name).read_text())["cells"]


def source(cell) -> str:
    return "".join(cell["source"])


def output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def png_widths(name: str) -> list:
    """The pixel width of every stored PNG figure (from its IHDR header)."""
    return [
        struct.unpack(">I", base64.b64decode(out["data"]["image/png"])[16:20])[0]
        for cell in cells(name)
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
