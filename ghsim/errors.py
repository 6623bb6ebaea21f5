"""The errors ghsim raises.

:class:`InputError` and its subclasses are user mistakes: the command line turns them into exit
status 2 and one line on stderr, never a traceback. Anything else escaping is a bug (exit 1).
"""

from __future__ import annotations

MAX_PART_CHARS = 240
"""Longest source, key path or message shown in an error line (a ``--set`` of a megabyte is
shown by its start, its end and its length)."""


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control characters such as ESC,
    newlines, lone surrogates) written as its Python escape, so it can never act on a terminal
    or fail to encode."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def shorten(text: str, limit: int = MAX_PART_CHARS) -> str:
    """``text`` cut in the middle when longer than ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2 - 20, 8)
    return f"{text[:keep]}...({len(text):,} characters)...{text[-keep:]}"



class GhsimError(Exception):
    """Base class of every error ghsim raises on purpose."""


class InputError(GhsimError):
    """Bad input from the user: a config file, an override or a trace.

    ``source`` names where the mistake is (a file path or ``--set KEY=VALUE``), ``key_path`` the
    dotted key inside it (empty for the whole file) and ``message`` what was expected.
    """

    def __init__(self, source: str, key_path: str, message: str) -> None:
        self.source = source
        self.key_path = key_path
        self.message = message
        super().__init__(source, key_path, message)

    def __str__(self) -> str:
        return self.line()

    def line(self) -> str:
        """The one line shown to the user (control characters, newlines included, escaped)."""
        source, key = shorten(printable(self.source)), shorten(printable(self.key_path))
        where = f"{source}: {key}" if key else source
        return f"{where}: {shorten(printable(self.message), 4 * MAX_PART_CHARS)}"


class ConfigError(InputError):
    """A YAML config file (hardware, system, model, scenario, sweep) is wrong."""


class OverrideError(InputError):
    """A ``--set KEY.PATH=VALUE`` override is wrong."""


class LayoutError(InputError):
    """A parallel layout that cannot be laid on the scenario's GPUs or model."""


class LimitError(InputError):
    """An input the schema accepts but whose work is beyond one of ghsim's documented limits
    (:mod:`ghsim.limits`): ops to simulate, pages to track, points of a sweep."""
