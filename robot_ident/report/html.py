"""The HTML report of a result folder (page.py)."""
from __future__ import annotations

from pathlib import Path


def write_html_report(folder: str | Path, compare=None, trajectory=None, output=None) -> Path:
    """report.html of a result (or validation-only) folder: see report/page.py."""
    from .page import write_report
    return write_report(folder, compare=compare, trajectory=trajectory, output=output)
