"""The package's import graph: no cycles, and no module imports a layer above its own (lazy imports included).

Layers, lowest first (CONVENTIONS.md's whiteboard: measure -> history -> hardware -> features -> models ->
fitting -> predict -> plan/analysis -> plot/report/cli, read as "who may import whom"). ``measure`` records runs
into a history, so it sits just above the history modules it writes with; ``persistence`` knows the models and
sits beside ``fitting`` (which caches fitted models through it).
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "perfmodel"
SHARED_TOOL = ROOT.parents[2] / "shared" / "tools" / "import_cycles.py"

LAYERS = [
    ("base", ["perfmodel", "perfmodel.exceptions", "perfmodel._validation", "perfmodel._format",
              "perfmodel._delegates", "perfmodel._version", "perfmodel._atomic", "perfmodel._rows",
              "perfmodel.metrics"]),
    ("hardware", ["perfmodel.hardware"]),
    ("history", ["perfmodel.schema", "perfmodel.io", "perfmodel.datasets"]),
    ("measure", ["perfmodel.measure", "perfmodel.importers", "perfmodel.integrations"]),
    ("features", ["perfmodel.features"]),
    ("models", ["perfmodel.models"]),
    ("fitting", ["perfmodel.fitting", "perfmodel.persistence", "perfmodel.cache"]),
    ("predict", ["perfmodel.predict"]),
    ("plan/analysis", ["perfmodel.plan", "perfmodel.analysis", "perfmodel.evaluate"]),
    ("plot/report/cli", ["perfmodel.plot", "perfmodel.report", "perfmodel.cli", "perfmodel.__main__"]),
]


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = ("perfmodel",) + f.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _edges(mods):
    """module -> {imported module: line}, every import statement anywhere in the file (functions too)."""
    edges = {m: {} for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    targets.append(next((c for c in (f"{base}.{a.name}", base) if c in mods), None))
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name in mods]
            for t in targets:
                if t and t != m:
                    edges[m].setdefault(t, node.lineno)
    return edges


def _layer(module: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p != "perfmodel" and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (rank, len(p))
    if best is None:
        raise AssertionError(f"{module} has no layer: add it to LAYERS in tests/test_layers.py")
    return best[0]


class TestLayers:
    def test_every_module_has_a_layer(self):
        for m in _modules():
            _layer(m)

    def test_no_module_imports_a_higher_layer(self):
        mods = _modules()
        bad = []
        for m, targets in _edges(mods).items():
            for t, line in targets.items():
                if _layer(t) > _layer(m):
                    bad.append(f"{mods[m].relative_to(ROOT.parent)}:{line} ({LAYERS[_layer(m)][0]}) imports {t} "
                               f"({LAYERS[_layer(t)][0]})")
        assert not bad, "imports against the layers:\n" + "\n".join(bad)

    def test_no_import_cycles(self):
        mods = _modules()
        edges = _edges(mods)
        # depth-first search for a back edge
        state: dict[str, int] = {}
        cycle: list[str] = []

        def visit(v, path):
            state[v] = 1
            for w in edges[v]:
                if state.get(w) == 1:
                    cycle.extend(path[path.index(w):] + [w])
                    return True
                if w not in state and visit(w, path + [w]):
                    return True
            state[v] = 2
            return False

        for v in sorted(mods):
            if v not in state and visit(v, [v]):
                break
        assert not cycle, "import cycle: " + " -> ".join(cycle)

    @pytest.mark.skipif(not SHARED_TOOL.is_file(), reason="the shared import_cycles tool is not checked out")
    def test_shared_import_cycles_tool_agrees(self):
        res = subprocess.run([sys.executable, str(SHARED_TOOL), str(ROOT)], capture_output=True, text=True)
        assert res.returncode == 0 and "import cycle" not in res.stdout, res.stdout + res.stderr

    def test_model_conveniences_reach_the_higher_layers(self, tmp_path):
        # model.save / model.plot_* work although models/ never imports persistence or plot
        import perfmodel
        from perfmodel.models import TrainingTimeModel

        runs = perfmodel.load_bundled_runs()
        model = TrainingTimeModel(method="loglinear", cv=None).fit(runs)
        model.save(tmp_path / "m.perfmodel")
        again = perfmodel.load_model(tmp_path / "m.perfmodel")
        assert again.predict(runs.head(3)) == pytest.approx(model.predict(runs.head(3)))
