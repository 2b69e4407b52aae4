"""The README is a front door within its length, its generated tables and the docs' benchmark pages say what
``benchmarks/results/*.json`` say (``scripts/readme_tables.py``), and the bundled data are package data."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

import perfmodel
from perfmodel import datasets

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _tables():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TestReadme:
    def test_length(self):
        assert len(README.splitlines()) <= 250

    def test_ci_blocks_are_there_and_install_torch_first(self):
        for step in ("install", "main", "test"):
            assert re.search(rf"<!-- ci:{step} -->\n```bash\n.+\n```", README), step
        install = re.search(r"<!-- ci:install -->\n```bash\n(.+)\n```", README).group(1)
        assert install.startswith("pip install torch==") and "&& pip install \".[" in install

    def test_lists_every_extra(self):
        for extra in ("measure", "parquet", "plot", "notebook", "hf", "mlflow", "lightning", "slurm", "docs", "test"):
            assert f"| `{extra}` |" in README, extra

    def test_no_dated_runs(self):
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README)

    def test_links_to_docs_exist(self):
        for target in re.findall(r"\]\(((?:docs/|data/|CHANGELOG)[^)#]*)", README):
            assert (ROOT / target).exists(), target


class TestGeneratedBlocks:
    @pytest.mark.parametrize("name", ["results", "accuracy", "cross-hardware", "new-architectures"])
    def test_committed_blocks_are_what_the_script_generates(self, name):
        tables = _tables()
        fn, files = tables.BLOCKS[name]
        assert files
        for f in files:
            text = (ROOT / f).read_text(encoding="utf-8")
            assert tables.block(text, name) is not None, f"{f} has no generated:{name} block"
            assert tables.fill(text, [name]) == text, f"{f} is out of date: run python scripts/readme_tables.py"

    def test_readme_table_comes_from_the_results(self):
        import json

        acc = json.loads((ROOT / "benchmarks" / "results" / "accuracy.json").read_text())
        auto = next(r for r in acc["table"] if r["split"] == "leave-one-model-out" and r["method"] == "auto")
        assert f"| {auto['median_ape']:.1f}% | {auto['coverage']:.3f} |" in _tables().block(README, "results")

    def test_api_block_lists_the_public_api(self):
        block = _tables().api_reference()
        assert {n for n in perfmodel.__all__ if n != "__version__"} == set(re.findall(r"\[`(\w+)`\]", block))

    def test_cli_block_has_every_command(self):
        from perfmodel import cli

        sub = next(a for a in cli._parser()._actions if a.dest == "command").choices
        block = _tables().cli_reference()
        assert all(f"## `perfmodel {name}`" in block for name in sub)


class TestBundledData:
    def test_found_as_package_data(self, monkeypatch):
        from importlib import resources

        monkeypatch.delenv("PERFMODEL_DATA", raising=False)
        expected = pathlib.Path(str(resources.files("perfmodel") / "data" / "runs_cpu.csv")).resolve()
        assert datasets.bundled_runs_path() == expected
        assert datasets.bundled_data_dir().resolve() == expected.parent

    def test_every_tracked_data_file_is_in_the_package_folder(self):
        folder = datasets.bundled_data_dir()
        for name in ("runs_cpu.csv", "mlperf_steps.csv", "prices.csv", "README.md"):
            assert (folder / name).is_file(), name

    def test_pyproject_ships_the_whole_folder(self):
        text = (ROOT / "pyproject.toml").read_text()
        section = text[text.index("[tool.setuptools.package-data]"):]
        assert '"data/*"' in section.split("\n[", 1)[0]

    def test_perfmodel_data_override_comes_first(self, tmp_path, monkeypatch):
        (tmp_path / "prices.csv").write_text("x\n")
        monkeypatch.setenv("PERFMODEL_DATA", str(tmp_path))
        assert datasets.bundled_runs_path("prices.csv") == (tmp_path / "prices.csv").resolve()
        assert datasets.bundled_runs_path("runs_cpu.csv").parent == datasets.bundled_data_dir().resolve()

    def test_missing_file_says_where_it_looked(self, monkeypatch):
        monkeypatch.delenv("PERFMODEL_DATA", raising=False)
        with pytest.raises(FileNotFoundError, match="nope.csv.*looked in"):
            datasets.bundled_runs_path("nope.csv")
