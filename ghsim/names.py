"""Names the command line offers before anything heavy is imported (argparse choices).

They mirror registries that live in heavier modules; ``tests/test_cli.py`` checks that they
agree, so a new trace format or file kind cannot be forgotten here.
"""

from __future__ import annotations

TRACE_FORMATS = ("auto", "kineto", "pytorch-et", "chakra", "chakra-json", "nsys")
"""``ghsim import --format``: ``auto`` and the readers of ``ghsim.importers.cli_import``."""

SCHEMA_KINDS = ("hardware", "system", "model", "scenario", "validation_points", "sweep",
                "inference_points")
"""``ghsim schema KIND``: the kinds of ``ghsim.config.schema_export``."""
