"""MkDocs hook: fill the generated blocks of a page (results tables, the CLI reference) when the site is built.

The blocks come from ``scripts/readme_tables.py``, the script that also rewrites them in the committed files, so
the built site shows what ``benchmarks/results/`` and the argparse parsers say at build time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "readme_tables.py"
_spec = importlib.util.spec_from_file_location("readme_tables", _SCRIPT)
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)


def on_page_markdown(markdown, page, config, files):
    if "<!-- generated:" in markdown:
        return tables.fill(markdown)
    return markdown
