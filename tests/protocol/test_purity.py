"""protocol/ is sans-IO: no module in it may import sockets, TLS, threads, selectors, clocks or asyncio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import spark_kafka_sink.protocol

FORBIDDEN = {"socket", "ssl", "threading", "selectors", "time", "asyncio"}
PROTOCOL_DIR = Path(spark_kafka_sink.protocol.__file__).parent
MODULES = sorted(PROTOCOL_DIR.rglob("*.py"))


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level module) of every import, including importlib.import_module("x") / __import__("x")."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return [(line, module.split(".")[0]) for line, module in found]


def test_protocol_package_has_modules() -> None:
    # Subpackages and their private modules are checked too, not just the top level.
    names = {m.relative_to(PROTOCOL_DIR).as_posix() for m in MODULES}
    assert {"primitives/__init__.py", "primitives/_reader.py", "record_batch/__init__.py", "compression.py",
            "arrow_encoder.py", "murmur2.py", "messages/codec.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PROTOCOL_DIR)))
def test_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = [f"line {line}: {module}" for line, module in imported_modules(tree) if module in FORBIDDEN]
    assert not bad, f"{path.name} imports I/O or clock modules: {bad}"


def test_the_checker_catches_each_form() -> None:
    source = "import socket\nfrom time import monotonic\nimport asyncio.events\nimportlib.import_module('ssl')\n"
    assert {m for _, m in imported_modules(ast.parse(source))} == {"socket", "time", "asyncio", "ssl"}
