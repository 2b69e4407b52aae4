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
    ("base", ["perfmodel", "perfmodel.exceptions", "perfmodel._validation", "perfmodel._methods", "perfmodel._format", "perfmodel.transformer", "perfmodel.layout",
              "perfmodel._version", "perfmodel._atomic", "perfmodel._rows", "perfmodel.metrics"]),
    ("hardware", ["perfmodel.hardware"]),
    ("history", ["perfmodel.schema", "perfmodel.io", "perfmodel.datasets",
                 "perfmodel.history", "perfmodel.kinds", "perfmodel.store"]),
    ("measure", ["perfmodel.measure", "perfmodel.importers", "perfmodel.integrations"]),
    ("features", ["perfmodel.features", "perfmodel.layout_features"]),
    ("models", ["perfmodel.models"]),
    ("fitting", ["perfmodel.fitting", "perfmodel.persistence", "perfmodel.cache"]),
    ("predict", ["perfmodel.predict"]),
    ("plan/analysis", ["perfmodel.plan", "perfmodel.analysis", "perfmodel.evaluate"]),
    ("api", ["perfmodel.predictor"]),
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

    def test_no_private_names_imported_across_modules(self):
        # what one module shares with another is public inside the package (no `from x import _y`)
        mods = _modules()
        bad = []
        for m, f in mods.items():
            pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("perfmodel")):
                    base = node.module or ""
                    if node.level:
                        base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
                    for a in node.names:
                        if f"{base}.{a.name}" in mods:  # a private module may be imported; its private names not
                            continue
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            bad.append(f"{f.relative_to(ROOT.parent)}:{node.lineno} imports {a.name}")
        assert not bad, "private names imported across modules:\n" + "\n".join(bad)

    def test_kinds_and_interval_rules_defined_once(self):
        # the kinds of query live in perfmodel.kinds, the interval rules in models/_conformal.py: no other
        # module spells out the kinds' names together or defines a conformal quantile or score book
        kinds = ("new_batch", "new_count", "new_pair", "new_model", "new_device")
        owners = {"perfmodel.kinds"}
        for m, f in _modules().items():
            text = f.read_text()
            if m not in owners:  # a collection (tuple, list, set, dict) naming three or more kinds
                for node in ast.walk(ast.parse(text)):
                    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                        items = node.keys if isinstance(node, ast.Dict) else node.elts
                        spelled = [i.value for i in items if isinstance(i, ast.Constant) and i.value in kinds]
                        assert len(spelled) < 3, f"{m}:{node.lineno} lists the kinds of query {spelled}: ask " \
                                                 "perfmodel.kinds"
            if m != "perfmodel.models._conformal":
                for name in ("def conformal_quantile", "def balanced_scores", "def half_widths", "def score_set",
                             "GroupKFold(", "KFold("):
                    assert name not in text, f"{m} defines {name!r}: interval rules and refit folds live in " \
                                             "perfmodel.models._conformal"

    def test_the_method_names_are_listed_once(self):
        # the methods' vocabulary lives in perfmodel._methods (the registry, the CLI's --method choices and the
        # selection read it): no other module spells out most of the method names together
        from perfmodel import _methods
        from perfmodel.cli._flags import METHOD_CHOICES

        assert METHOD_CHOICES == list(_methods.METHOD_CHOICES) == ["auto", *_methods.METHODS]
        spelled = _collections_naming(set(_methods.METHODS), 6, owner="perfmodel._methods")
        assert not spelled, f"modules listing the methods (ask perfmodel._methods): {spelled}"

    def test_the_precisions_are_listed_once(self):
        # the precisions live in perfmodel.hardware._spec (PRECISIONS, ELEMENT_BYTES, MIXED_PRECISIONS)
        precisions = {"fp32", "tf32", "fp16", "bf16", "fp8"}
        spelled = _collections_naming(precisions, 4, owner="perfmodel.hardware._spec")
        assert not spelled, f"modules listing the precisions (ask perfmodel.hardware): {spelled}"
        # the check sees the owner's own lists (it is not passing on nothing)
        assert any(s.startswith("perfmodel.hardware._spec:") for s in _collections_naming(precisions, 4, owner=""))


def _collections_naming(names: set, at_least: int, *, owner: str) -> list[str]:
    """``module:line [names]`` for each tuple, list, set or dict outside ``owner`` whose items (a dict's keys) name
    ``at_least`` of ``names``."""
    found = []
    for m, f in _modules().items():
        if m == owner:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                spelled = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
                if len(spelled) >= at_least:
                    found.append(f"{m}:{node.lineno} {spelled}")
    return found
