"""Reading YAML safely: one mapping per file, no duplicate keys, plain scientific notation.

Only ``yaml.SafeLoader`` is used (no arbitrary objects). Two PyYAML habits that silently lose a
user's data are turned into errors or fixed: a key given twice (PyYAML keeps the last) is an
error, and ``1e9`` (YAML 1.1 reads it as a string) is read as the number it looks like.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ghsim.config.diagnose import show_value
from ghsim.config.search import display
from ghsim.errors import ConfigError

_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class _StrictSafeLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, reads ``1e9`` as a float, and knows only
    ``true``/``false`` as booleans (YAML 1.2)."""


def _construct_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) or key is None:
            raise yaml.constructor.ConstructorError(
                None, None, "expected a plain scalar key", key_node.start_mark
            )
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictSafeLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)
_StrictSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# YAML 1.2 booleans only: ``no``, ``on`` and ``off`` stay strings, as a reader expects.
_StrictSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _StrictSafeLoader.yaml_implicit_resolvers.items()
}
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789.")
)


def parse_yaml(text: str, source: str) -> Any:
    """Parse one YAML document from ``text``; ``source`` names it in errors."""
    try:
        documents = list(yaml.load_all(text, Loader=_StrictSafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "malformed YAML"
        raise ConfigError(source, "", f"{where}malformed YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"malformed YAML: {' '.join(str(exc).split())}") from None
    if len(documents) > 1:
        raise ConfigError(source, "", f"expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


def read_mapping(path: Path) -> dict[str, Any]:
    """Read a YAML file whose document must be a mapping with string keys."""
    source = display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(source, "", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(source, "", "expected a YAML file, found a directory") from None
    except UnicodeDecodeError:
        raise ConfigError(source, "", "expected UTF-8 text, found binary data") from None
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read file: {exc.strerror}") from None
    document = parse_yaml(text, source)
    return ensure_mapping(document, source, "")


def ensure_mapping(document: Any, source: str, key_path: str) -> dict[str, Any]:
    """Check that ``document`` is a mapping with string keys and return it."""
    if document is None:
        raise ConfigError(source, key_path, "expected a mapping of keys to values, found nothing")
    if not isinstance(document, dict):
        found = show_value(document)
        raise ConfigError(source, key_path, f"expected a mapping of keys to values, got {found}")
    for key in document:
        if not isinstance(key, str):
            raise ConfigError(source, key_path, f"expected string keys, got {key!r}")
    return document
