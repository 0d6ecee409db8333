"""Python objects named in options: the counterpart of the Java client's class-name settings.

    resolve_object("partitioner.class", "mypkg.partitioners.ByRegion")   # imported; a class is instantiated

Spark options are strings, so an option that takes a Python object (a partitioner, interceptors, an OAUTHBEARER
token provider) also takes the dotted path ``package.module.name`` of one, imported where the option is read (on
the executors for a Spark write). A path that looks like a Java class says that it cannot run here.
"""

from __future__ import annotations

import importlib
from typing import Any

from spark_kafka_sink.errors import ConfigError

__all__ = ["resolve_object"]

_JAVA_ROOTS = ("org.", "com.", "io.", "net.")


def resolve_object(name: str, raw: Any, java_hint: str = "") -> Any:
    """A Python object as is, or a dotted path ``package.module.attr`` imported and, if it names a class,
    instantiated without arguments. ``java_hint`` ends the error for a path that looks like a Java class name.
    Errors are ConfigError naming the option ``name``."""
    if not isinstance(raw, str):
        return raw
    module_name, _, attr = raw.strip().rpartition(".")
    if not module_name:
        raise ConfigError(f"{name}={raw!r} is invalid: expected a Python object or a dotted path package.module.name",
                          key=name)
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        if raw.strip().startswith(_JAVA_ROOTS):  # a configuration copied from Java names its classes
            raise ConfigError(f"{name}={raw!r} looks like a Java class, which cannot run here: give a Python object "
                              f"or the dotted path of one (package.module.name) doing the same{java_hint}",
                              key=name) from None
        raise ConfigError(f"{name}={raw!r}: cannot import it ({exc})", key=name) from None
    return target() if isinstance(target, type) else target
