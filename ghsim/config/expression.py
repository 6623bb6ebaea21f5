"""Safe evaluation of a sweep's ``filter``: arithmetic, comparisons and logic over key paths.

Only these Python expression nodes are accepted: numbers, strings, booleans, key paths written
as names and attributes (``parallelism.tp``, ``num_gpus``), ``+ - * / // %``, comparisons,
``and``/``or``/``not``. Nothing is imported, called or looked up outside the point's values.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class ExpressionError(ValueError):
    """A filter that is not a valid expression of the accepted form."""


def parse_filter(text: str) -> ast.Expression:
    """Parse and check a filter; raises :class:`ExpressionError`."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"not a valid expression: {error.msg}") from None
    for node in ast.walk(tree):
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name,
                   ast.Attribute, ast.Constant, ast.Load, ast.Tuple, ast.List, ast.And, ast.Or,
                   ast.Not, ast.USub, *_BINARY, *_COMPARE)
        if not isinstance(node, allowed):
            raise ExpressionError(f"{type(node).__name__} is not allowed in a filter")
    return tree


def _path(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_path(node.value)}.{node.attr}"
    raise ExpressionError("expected a key path")


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
            return _BINARY[type(node.op)](run(node.left), run(node.right))
        if isinstance(node, ast.UnaryOp):
            value = run(node.operand)
            return (not value) if isinstance(node.op, ast.Not) else -value
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
