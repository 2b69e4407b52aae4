"""The public API does not change by accident: every public module's public names and signatures are listed in
``tests/data/public_api.txt`` (``scripts/public_api.py`` writes it). A change to the API is a change to that file,
made on purpose with ``python scripts/public_api.py --write`` and stated in CHANGELOG.md."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("    "):
            out[current].append(line.strip())
        else:
            current = line.split(":", 1)[0]
            out[current] = [line] if ":" in line else []
    return out


def _script():
    spec = importlib.util.spec_from_file_location("public_api", ROOT / "scripts" / "public_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_public_api_is_the_listed_one():
    mod = _script()
    listed = _sections(mod.LISTING.read_text())
    here = _sections(mod.listing())
    assert sorted(here) == sorted(listed), "public modules added or removed: run scripts/public_api.py --write"
    # a module this machine cannot import (an optional dependency missing) is checked where it can be
    unchecked = {m for m, lines in here.items() if lines and "not importable" in lines[0]}
    changed = {m: sorted(set(here[m]) ^ set(listed[m])) for m in here
               if m not in unchecked and here[m] != listed[m]}
    assert not changed, ("the public API changed (run `python scripts/public_api.py --write` if on purpose, and "
                         f"state it in CHANGELOG.md): {changed}")


def test_the_sections_parse():
    text = "perfmodel\n    fit: function (runs)\nperfmodel.x: not importable without torch\nperfmodel.y\n"
    assert _sections(text) == {"perfmodel": ["fit: function (runs)"],
                               "perfmodel.x": ["perfmodel.x: not importable without torch"], "perfmodel.y": []}


@pytest.mark.parametrize("module, old, new", [
    ("perfmodel.io", "read_history", "read_raw_history"),
    ("perfmodel.evaluate", "BASELINES", "EVALUATION_BASELINES"),
    ("perfmodel.predict", "layout_columns", "query_layout_columns"),
    ("perfmodel.measure.layouts", "layout_problems", "layout_run_problems"),
])
def test_renamed_names_still_answer_with_a_deprecation_warning(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {module}.{new}"):
        assert getattr(mod, old) is getattr(mod, new)
    assert old not in mod.__all__ and new in mod.__all__
