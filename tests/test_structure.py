"""House style checks over the package's source (DESIGN.md section 5): layers import downward only, no import
cycles, no mixins or half-classes, no ``__module__`` rewriting, no module that only re-exports another, no module
but the config reads a raw option key; and the test-naming rule below.

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

from spark_kafka_sink.producer.config_options import IGNORED_OPTIONS, OPTIONS_BY_NAME, UNSUPPORTED_OPTIONS
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


# The modules that read the user's Java-named options: the producer's config and its table of options. The schema
# registry's settings are parsed once too, in their own module, from names that Confluent's clients share with
# the producer's TLS options (ssl.ca.location, ssl.key.password ...).
CONFIG_MODULES = {"spark_kafka_sink.producer.config", "spark_kafka_sink.producer.config_options",
                  "spark_kafka_sink.schema_registry._settings"}
# protocol/ holds the wire messages, whose field names can be spelled as an option is (Produce's "acks"); it is
# below the config and never sees an option.
WIRE_PACKAGE = "spark_kafka_sink.protocol"
JAVA_OPTION_NAMES = frozenset({*OPTIONS_BY_NAME, *UNSUPPORTED_OPTIONS, *IGNORED_OPTIONS})
_LOOKUPS = ("get", "pop", "setdefault")


def raw_option_reads(tree: ast.AST) -> list[str]:
    """Where ``tree`` looks a Java option up by its name: ``options["linger.ms"]``, ``options.get("acks")`` (or
    ``.pop`` / ``.setdefault``, or a local ``get("...")``), ``"ssl.ca.location" in options``."""
    found = []
    for node in ast.walk(tree):
        keys: list[ast.expr] = []
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Store):
            keys = [node.slice]  # (a store builds an option dict for the config; that is no read)
        elif isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            keys = [node.args[0]] if name in _LOOKUPS else []
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            keys = [node.left]
        found += [f"line {key.lineno}: {key.value!r}" for key in keys
                  if isinstance(key, ast.Constant) and key.value in JAVA_OPTION_NAMES]
    return found


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n not in CONFIG_MODULES
                                        and not n.startswith(WIRE_PACKAGE)))
def test_only_the_config_reads_raw_option_keys(name: str) -> None:
    """House style 6: configuration is parsed once. Outside the config (producer/config.py and
    producer/config_options.py) no module of the package reads a raw option: none uses a string literal equal to
    a Java option name (config_options' OPTIONS, UNSUPPORTED_OPTIONS, IGNORED_OPTIONS) as a subscript, as the key
    of ``.get`` / ``.pop`` / ``.setdefault`` (or of a local ``get``), or on the left of ``in`` / ``not in``. Every
    layer reads the typed values of the parsed ProducerConfig (the network settings through net_config(), the
    security settings through security_settings()); spark/options.py reads its Spark options (``topic``,
    ``kafka.bootstrap.servers`` ...) and hands the ``kafka.*`` ones to ProducerConfig. Writing an option into a
    dict for the config (``config["transactional.id"] = ...``) and naming one in a message are no reads."""
    reads = raw_option_reads(ast.parse(MODULES[name].read_text()))
    assert not reads, f"{name} reads raw option keys (read the parsed ProducerConfig instead): {reads}"


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
