"""Reading YAML safely: one mapping per file, no duplicate keys, plain scientific notation.

PyYAML's safe constructor is used (no arbitrary objects), on libyaml's parser where PyYAML has
it (its pure-Python parser otherwise; the two read ghsim's files alike). Two PyYAML habits that
silently lose a user's data are turned into errors or fixed: a key given twice (PyYAML keeps the
last) is an error, and ``1e9`` (YAML 1.1 reads it as a string) is read as the number it looks
like.

Hostile documents are refused before they are built (:mod:`ghsim.limits`): a file larger than
``MAX_CONFIG_BYTES`` or that is not a regular file, nesting deeper than ``MAX_YAML_DEPTH``
(counted while composing, so a ``[[[[...`` of a million levels stops at the limit), and aliases
that would add more than ``MAX_ALIAS_NODES`` nodes (a "billion laughs" bomb: the expanded size
of the composed graph is counted once per distinct node, in linear time) or refer to themselves.
A lone surrogate (``"\\udc80"``) is refused too: it is not text, and no output can encode it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from ghsim.config.diagnose import show_value
from ghsim.config.search import display
from ghsim.errors import ConfigError, InputError
from ghsim.files import read_capped
from ghsim.limits import MAX_ALIAS_NODES, MAX_CONFIG_BYTES, MAX_YAML_DEPTH

_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class YamlLimitError(ConfigError):
    """A YAML document beyond one of ghsim's limits (nesting depth, alias expansion), or holding
    text that no output can encode (a lone surrogate)."""


class _Limit(yaml.YAMLError):
    """Raised inside the loader; becomes a :class:`YamlLimitError` naming the source."""

    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate (undecodable bytes of a command line, or a ``"\\udc80"`` escape where
PyYAML's own parser reads one; libyaml refuses the escape): half of a UTF-16 pair, not a
character; it cannot be encoded in UTF-8, so no output could hold it."""


def _lone_surrogate(match: re.Match[str]) -> str:
    """What a lone surrogate found by :data:`_SURROGATE` is, escaped so that it can be shown."""
    return ("expected valid Unicode text, got the lone surrogate "
            f"{match.group().encode('unicode_escape').decode()}")

_SATURATED = 2**62
"""Node counts are added up to here and no further (a bomb's true count has hundreds of
digits)."""


class _Strict(Composer, SafeConstructor, Resolver):
    """Safe construction that rejects duplicate keys, reads ``1e9`` as a float, and knows
    only ``true``/``false`` as booleans (YAML 1.2); it bounds nesting and alias expansion
    while PyYAML's Python composer composes the parser's events (the loaders below)."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                event = self.peek_event()  # type: ignore[attr-defined]
                raise _Limit(f"expected mappings and lists nested at most {MAX_YAML_DEPTH} deep "
                             "(ghsim.limits.MAX_YAML_DEPTH)", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            memo: dict[int, tuple[int, int]] = {}
            expanded, _ = _measure(node, 1, memo, set())
            if expanded - len(memo) > MAX_ALIAS_NODES:
                raise _Limit(f"aliases expand the document to {_count(expanded)} nodes from "
                             f"{len(memo):,} written (an alias bomb?); expected aliases to add "
                             f"at most {MAX_ALIAS_NODES:,} (ghsim.limits.MAX_ALIAS_NODES)",
                             node.start_mark)
        return node


def _count(nodes: int) -> str:
    return f"more than {_SATURATED:.3g}" if nodes >= _SATURATED else f"{nodes:,}"


def _measure(node: yaml.Node, depth: int, memo: dict[int, tuple[int, int]],
             active: set[int]) -> tuple[int, int]:
    """Nodes under ``node`` with aliases expanded, and its height; raises :class:`_Limit` when
    the expanded nesting is too deep or an alias refers to a node that contains it."""
    key = id(node)
    if key in memo:
        size, height = memo[key]
    else:
        if key in active:
            raise _Limit("an alias refers to a node that contains it (a recursive document)",
                         node.start_mark)
        if depth > MAX_YAML_DEPTH:
            raise _Limit(f"expected mappings and lists nested at most {MAX_YAML_DEPTH} deep, "
                         "aliases expanded (ghsim.limits.MAX_YAML_DEPTH)", node.start_mark)
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
            surrogate = _SURROGATE.search(node.value)
            if surrogate is not None:
                raise _Limit(f"{_lone_surrogate(surrogate)} (not a character: no file or "
                             "terminal can show it)", node.start_mark)
        active.add(key)
        size, height = 1, 0
        for child in children:
            inner, below = _measure(child, depth + 1, memo, active)
            size = min(_SATURATED, size + inner)
            height = max(height, below + 1)
        active.discard(key)
        memo[key] = (size, height)
    if depth + height > MAX_YAML_DEPTH:
        raise _Limit(f"expected mappings and lists nested at most {MAX_YAML_DEPTH} deep, "
                     "aliases expanded (ghsim.limits.MAX_YAML_DEPTH)", node.start_mark)
    return size, height


def _construct_mapping(loader: _Strict, node: yaml.MappingNode) -> dict[Any, Any]:
    """A mapping in which a key written twice is an error, but a key written after a merge
    (``<<: *defaults``) overrides the merged value, as YAML's merge key means it to (the first
    of several merged mappings that give a key wins)."""
    explicit = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # puts the merged pairs first
    merged = len(node.value) - explicit
    mapping: dict[Any, Any] = {}
    from_merge: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) or key is None:
            raise yaml.constructor.ConstructorError(
                None, None, "expected a plain scalar key", key_node.start_mark
            )
        if index < merged:
            if key not in mapping:
                mapping[key] = loader.construct_object(value_node, deep=True)
                from_merge.add(key)
            continue
        if key in mapping and key not in from_merge:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        from_merge.discard(key)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_Strict.add_constructor(  # type: ignore[type-var]
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)
_Strict.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
# YAML 1.2 booleans only: ``no``, ``on`` and ``off`` stay strings, as a reader expects.
_Strict.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _Strict.yaml_implicit_resolvers.items()
}
_Strict.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Strict.add_implicit_resolver(
    "tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789.")
)


class _PythonLoader(_Strict, Parser, Scanner, Reader):
    """The strict loader on PyYAML's own reader, scanner and parser, all in Python (where
    PyYAML has no libyaml; a test reads every shipped file with both loaders and compares)."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


_StrictSafeLoader: type[_Strict] = _PythonLoader
try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    pass
else:
    class _LibyamlLoader(_Strict, CParser):
        """The strict loader on libyaml's scanner and parser (a scenario's five files parse
        in 9 ms instead of 63); PyYAML's Python composer comes first in the method order, so
        nesting is still bounded node by node while composing."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _StrictSafeLoader = _LibyamlLoader


def parse_yaml(text: str, source: str, loader: type | None = None) -> Any:
    """Parse one YAML document from ``text``; ``source`` names it in errors. ``loader``: the
    strict loader to use (default: libyaml's where PyYAML has it)."""
    surrogate = _SURROGATE.search(text)
    if surrogate is not None:  # text read from a command line may hold one; libyaml takes none
        line = text.count("\n", 0, surrogate.start())
        column = surrogate.start() - (text.rfind("\n", 0, surrogate.start()) + 1)
        raise YamlLimitError(source, "", f"line {line + 1}, column {column + 1}: "
                             f"{_lone_surrogate(surrogate)}")
    try:
        documents = list(yaml.load_all(text, Loader=loader or _StrictSafeLoader))
    except _Limit as exc:
        mark = exc.mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise YamlLimitError(source, "", f"{where}{exc.message}") from None
    except RecursionError:
        raise YamlLimitError(source, "", "the document is nested too deeply to read") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "malformed YAML"
        if problem == "found character that cannot start any token" and mark:
            lines = text.splitlines()  # name it, as PyYAML's own parser did (a tab, mostly)
            if mark.line < len(lines) and mark.column < len(lines[mark.line]):
                problem = (f"found character {lines[mark.line][mark.column]!r} that cannot "
                           "start any token")
        if "maximum nesting depth" in problem:  # libyaml's own bound, met while scanning ahead
            raise YamlLimitError(source, "", f"{where}expected mappings and lists nested at most "
                                 f"{MAX_YAML_DEPTH} deep (ghsim.limits.MAX_YAML_DEPTH)") from None
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
        data = read_capped(path, MAX_CONFIG_BYTES, "ghsim.limits.MAX_CONFIG_BYTES", source,
                           "a YAML file")
    except InputError as error:
        raise ConfigError(error.source, error.key_path, error.message) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(source, "", "expected UTF-8 text, found binary data") from None
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
