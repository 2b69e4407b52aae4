"""The package's import graph: no cycles, and no module imports a layer above its own (lazy imports included).

Layers, lowest first (:data:`LAYERS`: base -> hardware -> history -> measure/importers -> features -> models ->
fitting -> predict -> plan/analysis -> the Predictor -> plot/report/cli, read as "who may import whom"; the map in
docs/development.md draws the same and a test here keeps it true). ``measure`` records runs into a history, so it
sits just above the history modules it writes with; ``persistence`` knows the models and sits beside ``fitting``
(which caches fitted models through it).
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "perfmodel"

LAYERS = [
    ("base", ["perfmodel", "perfmodel.exceptions", "perfmodel._validation", "perfmodel._methods", "perfmodel._format", "perfmodel.transformer", "perfmodel.layout",
              "perfmodel._version", "perfmodel._atomic", "perfmodel._rows", "perfmodel.metrics", "perfmodel._deprecation"]),
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


#: Packages whose row of the development page's map names each of their modules.
MAPPED_PACKAGES = ("predict", "plan", "cli", "hardware", "models", "io", "features")


def _map_rows() -> list[set[str]]:
    """The words of each row of docs/development.md's layer map (rows separated by a line holding only ↓)."""
    text = (ROOT.parents[1] / "docs" / "development.md").read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    rows = [r for r in re.split(r"\n\s*↓\s*\n", block) if r.strip()]
    return [set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", r)) for r in rows]


class TestLayers:
    def test_every_module_has_a_layer(self):
        for m in _modules():
            _layer(m)

    def test_the_development_pages_map_names_every_module_in_its_layers_order(self):
        rows = _map_rows()
        placed = {}
        for m in _modules():
            parts = m.split(".")
            if len(parts) < 2:
                continue
            where = [i for i, words in enumerate(rows) if parts[1] in words]
            assert len(where) == 1, f"{parts[1]} is in {len(where)} rows of the map in docs/development.md"
            placed[parts[1]] = (where[0], _layer(m))
            if parts[1] in MAPPED_PACKAGES and len(parts) > 2:
                assert parts[2] in rows[where[0]], f"{m} is not named in its package's row of the map"
        order = [rank for _, rank in sorted(placed.values())]
        assert order == sorted(order), "the map's rows are not in the order of LAYERS"

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
        # (models._registry's REGRESSORS is the registry's other half, the factories: test_models checks that
        # it names exactly these methods)
        spelled = _collections_naming(set(_methods.METHODS), 6, owner=("perfmodel._methods",
                                                                        "perfmodel.models._registry"))
        assert not spelled, f"modules listing the methods (ask perfmodel._methods): {spelled}"

    def test_the_precisions_are_listed_once(self):
        # the precisions live in perfmodel.hardware._spec (PRECISIONS, ELEMENT_BYTES, MIXED_PRECISIONS)
        precisions = {"fp32", "tf32", "fp16", "bf16", "fp8"}
        spelled = _collections_naming(precisions, 4, owner="perfmodel.hardware._spec")
        assert not spelled, f"modules listing the precisions (ask perfmodel.hardware): {spelled}"
        # the check sees the owner's own lists (it is not passing on nothing)
        assert any(s.startswith("perfmodel.hardware._spec:") for s in _collections_naming(precisions, 4, owner=""))


def _collections_naming(names: set, at_least: int, *, owner: str | tuple) -> list[str]:
    """``module:line [names]`` for each tuple, list, set or dict outside ``owner`` whose items (a dict's keys) name
    ``at_least`` of ``names``."""
    found = []
    for m, f in _modules().items():
        if m in ((owner,) if isinstance(owner, str) else owner):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                # an item names a precision as a constant, or as the first argument of a record (Precision("fp8", ...))
                consts = [i.args[0] if isinstance(i, ast.Call) and i.args else i for i in items]
                spelled = [i.value for i in consts if isinstance(i, ast.Constant) and i.value in names]
                if len(spelled) >= at_least:
                    found.append(f"{m}:{node.lineno} {spelled}")
    return found


#: Public names that more than one module defines on purpose, and why.
SHARED_NAMES = {
    "MLP": "two measurement workers' own toy networks (the zoo's and the layout worker's)",
    "PerfModelCallback": "one per training framework (perfmodel.integrations.hf, .lightning)",
    "main": "each runnable module's entry point",
    "as_int": "the MLPerf log reader's and the Hugging Face reader's own number rules",
}


def test_no_two_modules_define_one_public_name():
    # one owner per concept: a public function or class name is defined in one module (the renames of issue 37:
    # io.read_history, predict.layout_columns, measure.layouts.layout_problems, the query device resolver)
    owners: dict[str, set] = {}
    for m, f in _modules().items():
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                owners.setdefault(node.name, set()).add(m)
    clashes = {n: sorted(ms) for n, ms in owners.items() if len(ms) > 1 and n not in SHARED_NAMES}
    assert not clashes, f"names defined in several modules (rename one, or list it in SHARED_NAMES): {clashes}"
    assert all(len(owners.get(n, ())) > 1 for n in SHARED_NAMES), "SHARED_NAMES lists a name defined once"
