"""House style checks over the package's source (DESIGN.md section 5): layers import downward only, no import
cycles, no mixins or half-classes, no ``__module__`` rewriting, no module that only re-exports another; and the
test-naming rule below.

Test names: in the folders that test one layer each (tests/protocol, tests/net, tests/producer and their
subfolders, which mirror the package's), a test file's name ends in ``_broker`` exactly when it needs a real Kafka
broker: one of its tests takes the ``kafka``, ``bootstrap``, ``topic_factory`` or ``readback`` fixture, or it
starts a ``KafkaCluster`` of its own. Tests against the scripted fake broker (tests/net/fake_broker.py) or the fake
client are not so named. The other folders say by their name what they need (tests/broker, tests/cluster,
tests/security, tests/kerberos: real processes; tests/spark: a Spark session, most also the broker)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from spark_kafka_sink.testing.broker_jars import REPO_ROOT

PACKAGE = REPO_ROOT / "spark_kafka_sink"
# Each layer may import the ones after it, never the ones before (spark -> producer -> net -> protocol).
LAYERS = ["spark", "producer", "net", "protocol"]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """Package modules ``name`` imports at module level (not inside functions, not only for type checkers)."""
    tree = ast.parse(MODULES[name].read_text())
    found: set[str] = set()
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - sub.level + 1] + [base]).strip(".")
                for alias in sub.names:
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if candidate in MODULES else base)
            elif isinstance(sub, ast.Import):
                found.update(alias.name for alias in sub.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_layers_import_only_downward() -> None:
    wrong = []
    for name, imported in GRAPH.items():
        mine = layer(name)
        for other in imported:
            theirs = layer(other)
            if mine is not None and theirs is not None and theirs < mine:
                wrong.append(f"{name} -> {other}")
    assert not wrong, wrong


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(GRAPH):
        if start not in state:
            visit(start, [start])
    assert not cycles, cycles


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_mixin_half_class_or_module_rewrite(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            assert not node.name.endswith("Mixin"), f"{name}.{node.name}"
        if isinstance(node, ast.Assign):
            assert not any(isinstance(t, ast.Attribute) and t.attr == "__module__" for t in node.targets), name


@pytest.mark.parametrize("name", sorted(n for n, p in MODULES.items() if p.name != "__init__.py"))
def test_no_module_only_re_exports(name: str) -> None:
    """A module that is not a package's ``__init__`` defines something of its own."""
    tree = ast.parse(MODULES[name].read_text())
    own = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
           or (isinstance(n, (ast.Assign, ast.AnnAssign)) and "__all__" not in ast.unparse(n))
           or isinstance(n, (ast.If, ast.Try, ast.Expr)) and n is not tree.body[0]]
    assert own, f"{name} only imports and re-exports"


LAYER_TEST_FOLDERS = ("protocol", "net", "producer")
REAL_BROKER_FIXTURES = {"kafka", "bootstrap", "topic_factory", "readback"}


def needs_real_broker(path: Path) -> bool:
    text = path.read_text()
    tree = ast.parse(text)
    arguments = {a.arg for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for a in node.args.args}
    return bool(arguments & REAL_BROKER_FIXTURES) or "KafkaCluster(" in text


@pytest.mark.parametrize("path", sorted(p for folder in LAYER_TEST_FOLDERS
                                        for p in (REPO_ROOT / "tests" / folder).rglob("test_*.py")),
                         ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_a_layer_test_is_named_broker_exactly_when_it_needs_a_real_broker(path: Path) -> None:
    named = path.stem.endswith("_broker")
    assert named == needs_real_broker(path), (
        f"{path.relative_to(REPO_ROOT)}: " + ("named *_broker but uses no real broker" if named else
                                             "uses a real broker: end its name in _broker"))
