"""The errors ghsim raises.

:class:`InputError` and its subclasses are user mistakes: the command line turns them into exit
status 2 and one line on stderr, never a traceback. Anything else escaping is a bug (exit 1).
"""

from __future__ import annotations


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
        where = f"{self.source}: {self.key_path}" if self.key_path else self.source
        text = f"{where}: {self.message}"
        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class ConfigError(InputError):
    """A YAML config file (hardware, system, model, scenario, sweep) is wrong."""


class OverrideError(InputError):
    """A ``--set KEY.PATH=VALUE`` override is wrong."""


class LayoutError(InputError):
    """A parallel layout that cannot be laid on the scenario's GPUs or model."""
