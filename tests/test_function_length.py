"""No function or method in src/ is over 80 lines, decorators and docstrings counted.

The project's rule (a long function hides several steps that want names)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
LIMIT = 80
EXEMPT: tuple[Path, ...] = ()  # folders left out (none)


def _lengths(path: Path) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function in ``path``."""
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                out.append((f"{prefix}{child.name}", start, end - start + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text("utf-8"), str(path)), "")
    return out


def _checked() -> list[Path]:
    return [
        p
        for p in sorted(SRC.rglob("*.py"))
        if not any(p.is_relative_to(folder) for folder in EXEMPT)
    ]


def test_no_function_is_over_the_limit() -> None:
    files = _checked()
    assert len(files) > 100  # the walk found the sources
    long = [
        f"{p.relative_to(SRC)}:{line} {name} is {n} lines"
        for p in files
        for name, line, n in _lengths(p)
        if n > LIMIT
    ]
    assert not long, "over 80 lines:\n" + "\n".join(long)


def test_the_measure_counts_decorators_and_docstrings(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT - 3))
    source = f'@staticmethod\ndef f():\n    """Why."""\n{body}\n'
    path = tmp_path / "m.py"
    path.write_text(source)
    ((name, line, n),) = _lengths(path)
    assert (name, line, n) == ("f", 1, LIMIT)
    method = "\n".join(f"        x{i} = {i}" for i in range(LIMIT - 1))
    path.write_text(f"class C:\n    @property\n    def g(self):\n{method}\n")
    assert [(name, n) for name, _, n in _lengths(path)] == [("C.g", LIMIT + 1)]
