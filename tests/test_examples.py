"""The ``Examples`` sections of the package's docstrings run and print what they say (``doctest``).

Every module of ``perfmodel`` is imported and its docstrings' examples are run, so an example whose output drifted
from the code fails here instead of misleading a reader.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import perfmodel


def _modules() -> list[str]:
    """The modules whose source has an example (``>>>``); ``__main__`` modules would run the CLI."""
    root = Path(perfmodel.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        if path.stem != "__main__" and ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = [t for t in finder.find(module, name) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    for t in tests:
        runner.run(t, out=out.append)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0
    assert failed == 0, "".join(out)
