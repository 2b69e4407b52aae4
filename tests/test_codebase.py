"""The package's size limits (issue 37): modules a maintainer can read, functions that do one job.

No module in ``src/perfmodel`` is over 800 lines; no function or method is over 80 lines, counted from its first
statement after the docstring to its last line (a docstring is documentation, not code to follow).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "perfmodel"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80


def _sources() -> list[pathlib.Path]:
    return sorted(ROOT.rglob("*.py"))


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line (0 for a docstring alone)."""
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        if len(body) == 1:
            return 0
        first = body[1]
    assert node.end_lineno is not None
    return node.end_lineno - first.lineno + 1


def test_the_limits_are_measured_on_the_package():
    # A moved source tree would make both tests below pass on nothing.
    assert len(_sources()) > 50


def test_no_module_is_over_800_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (cut them at a seam): {long}"


def test_no_function_is_over_80_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _body_lines(node)
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_the_function_count_skips_the_docstring():
    tree = ast.parse('def f():\n    """Doc\n\n    more doc.\n    """\n    a = 1\n    return a\n')
    assert _body_lines(tree.body[0]) == 2
    assert _body_lines(ast.parse('def g():\n    """Only a docstring."""\n').body[0]) == 0
