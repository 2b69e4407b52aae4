"""Paths the benchmarks' committed results may name: relative to the repository, never this machine's."""

from __future__ import annotations

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[1]


def rel(path) -> str:
    """``path`` relative to the repository, else its file name alone (a file kept outside it, e.g. data that may
    not be committed)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name
