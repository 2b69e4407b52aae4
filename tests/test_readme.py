"""The README and the methods page of the docs agree with the code: the method table (docs/guide/methods.md) lists
exactly METHODS plus ``auto``, the defaults it states are the defaults of the public entry points and the CLI, and
the README's first example prints what the code prints."""

from __future__ import annotations

import inspect
import pathlib
import re

import perfmodel
from perfmodel import cli, fitting, plan
from perfmodel.models import METHODS

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
METHODS_PAGE = (ROOT / "docs" / "guide" / "methods.md").read_text(encoding="utf-8")


def _method_table() -> dict[str, str]:
    section = METHODS_PAGE[METHODS_PAGE.index("## Methods\n"):]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(\w+)`(.*)", cells[0])
        if m:
            rows[m.group(1)] = {"name": m.group(2), "text": " ".join(cells[1:])}
    return rows


def test_method_table_lists_methods_and_auto():
    rows = _method_table()
    assert set(rows) == set(METHODS) | {"auto"}
    assert "(default" in rows["auto"]["name"] and not any(v["name"] for k, v in rows.items() if k != "auto")


def test_auto_is_the_default_everywhere():
    assert fitting.DEFAULT_METHOD == "auto"
    for fn in (perfmodel.fit, perfmodel.predict_training_time, perfmodel.predict_many, plan.recommend,
               fitting.fit_history):
        assert inspect.signature(fn).parameters["method"].default == fitting.DEFAULT_METHOD, fn.__name__
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("fit", "predict", "summary"):
        action = next(a for a in sub[name]._actions if a.dest == "method")
        assert action.default == fitting.DEFAULT_METHOD and set(action.choices) == set(METHODS) | {"auto"}


def test_auto_candidates_are_the_ones_the_table_names():
    assert all(f"`{m}`" in _method_table()["auto"]["text"] for m in fitting.AUTO_CANDIDATES)


def test_extrapolation_constants_match_the_methods_page():
    from perfmodel.models._conformal import EXTRAPOLATION_C, EXTRAPOLATION_D0

    assert f"`d0 = {EXTRAPOLATION_D0:g}`" in METHODS_PAGE
    assert f"`1 + {EXTRAPOLATION_C:g}·(d − {EXTRAPOLATION_D0:g})`" in METHODS_PAGE


def test_the_first_example_prints_what_the_readme_says():
    line = next(ln for ln in README.splitlines() if ln.startswith("print(r)") and "PI" in ln)
    quoted = re.search(r'# "(.+)"', line).group(1)
    r = perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_count=2, gpu_type="cpu", steps=20_000)
    # the same words and layout; the figures are whatever the shipped fit gives (a rebuild moves them)
    pattern = re.sub(r"\d+(?:\\\.\d+)?", lambda _: r"\d+(?:\.\d+)?", re.escape(quoted))
    assert re.fullmatch(pattern, str(r)), (str(r), quoted)
