"""Safe evaluation of a sweep's ``filter``: arithmetic, comparisons and logic over key paths.

Only these Python expression nodes are accepted: numbers, strings, booleans, key paths written
as names and attributes (``parallelism.tp``, ``num_gpus``), ``+ - * / // %``, comparisons,
``and``/``or``/``not``, lists and tuples of values (for ``in``), and calls of ``min``, ``max``
and ``abs``. Nothing is imported, called or looked up outside the point's values: a name or
attribute starting with ``_`` (``__class__``) is refused when the filter is parsed.

The work is bounded (:mod:`ghsim.limits`): at most ``MAX_FILTER_CHARS`` characters, a syntax
tree at most ``MAX_FILTER_DEPTH`` deep, arithmetic on numbers only (``'a' * 10**9`` cannot build
a string) and integers of at most ``MAX_FILTER_INT_BITS`` bits.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from ghsim.limits import MAX_FILTER_CHARS, MAX_FILTER_DEPTH, MAX_FILTER_INT_BITS

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
"""The only calls a filter may make."""
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name,
            ast.Attribute, ast.Constant, ast.Load, ast.Tuple, ast.List, ast.And, ast.Or,
            ast.Not, ast.USub, ast.UAdd, ast.Call, *_BINARY, *_COMPARE)


class ExpressionError(ValueError):
    """A filter that is not a valid expression of the accepted form."""


def _depth(node: ast.AST) -> int:
    """Height of the syntax tree (iteratively: the tree may be deeper than the stack)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(current))
    return deepest


def parse_filter(text: str) -> ast.Expression:
    """Parse and check a filter; raises :class:`ExpressionError`."""
    if len(text) > MAX_FILTER_CHARS:
        raise ExpressionError(f"expected at most {MAX_FILTER_CHARS:,} characters, got "
                              f"{len(text):,} (ghsim.limits.MAX_FILTER_CHARS)")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"not a valid expression: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError("the expression is nested too deeply to parse") from None
    depth = _depth(tree)
    if depth > MAX_FILTER_DEPTH:
        raise ExpressionError(f"expected an expression nested at most {MAX_FILTER_DEPTH} deep, "
                              f"got {depth} (ghsim.limits.MAX_FILTER_DEPTH)")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{type(node).__name__} is not allowed in a filter")
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name not in FUNCTIONS or node.keywords or not node.args:
                raise ExpressionError(f"expected calls of {', '.join(FUNCTIONS)} only, with "
                                      "positional arguments")
        if isinstance(node, ast.Attribute) and not isinstance(node.value, ast.Name | ast.Attribute):
            raise ExpressionError("expected a key path like parallelism.tp before '.'")
        if isinstance(node, ast.Name | ast.Attribute):
            segment = node.id if isinstance(node, ast.Name) else node.attr
            if segment.startswith("_"):
                raise ExpressionError(f"{segment!r} is not allowed in a filter (a key path "
                                      "names keys of the scenario, never Python attributes)")
        if isinstance(node, ast.Constant) and node.value is not None \
                and not isinstance(node.value, int | float | str):
            raise ExpressionError(f"the constant {node.value!r} is not allowed in a filter")
    return tree


def key_paths(tree: ast.Expression) -> list[str]:
    """The key paths a parsed filter reads (``parallelism.tp``), in order."""
    found: list[str] = []
    stack: list[ast.AST] = [tree.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name | ast.Attribute):
            found.append(_path(node))
        elif isinstance(node, ast.Call):
            stack.extend(reversed(node.args))
        else:
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def _path(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_path(node.value)}.{node.attr}"
    raise ExpressionError("expected a key path")


def _number(value: Any, what: str) -> Any:
    if isinstance(value, bool | int | float):
        return value
    raise ExpressionError(f"{what} needs numbers, got {type(value).__name__} {value!r:.40}")


def _bounded(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) \
            and value.bit_length() > MAX_FILTER_INT_BITS:
        raise ExpressionError(f"a value grows beyond 2^{MAX_FILTER_INT_BITS} "
                              "(ghsim.limits.MAX_FILTER_INT_BITS)")
    if isinstance(value, float) and math.isnan(value):
        raise ExpressionError("a value is not a number (nan)")
    return value


def evaluate(tree: ast.Expression, lookup: Callable[[str], Any]) -> Any:
    """Evaluate a parsed filter, resolving key paths with ``lookup``."""
    def run(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            return lookup(_path(node))
        if isinstance(node, ast.Tuple | ast.List):
            return [run(e) for e in node.elts]
        if isinstance(node, ast.BinOp):
            symbol = type(node.op).__name__.lower()
            left = _number(run(node.left), symbol)
            right = _number(run(node.right), symbol)
            return _bounded(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp):
            value = run(node.operand)
            if isinstance(node.op, ast.Not):
                return not value
            value = _number(value, "a sign")
            return -value if isinstance(node.op, ast.USub) else +value
        if isinstance(node, ast.BoolOp):
            values = (run(v) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare):
            left = run(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = run(comparator)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            args = [_number(run(a), name) for a in node.args]
            if name == "abs" and len(args) != 1:
                raise ExpressionError("abs takes one number")
            return _bounded(FUNCTIONS[name](*args) if name == "abs" or len(args) > 1
                            else args[0])
        raise ExpressionError(f"{type(node).__name__} is not allowed in a filter")

    return run(tree.body)


def lookup_in(data: Mapping[str, Any]) -> Callable[[str], Any]:
    """A key-path lookup over a nested mapping."""
    def lookup(path: str) -> Any:
        node: Any = data
        for key in path.split("."):
            if not isinstance(node, Mapping) or key not in node:
                raise ExpressionError(f"{path!r} names no key of the scenario")
            node = node[key]
        return node

    return lookup
