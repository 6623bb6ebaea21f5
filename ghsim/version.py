"""The ghsim version, read by the build backend and embedded in every result."""

__version__ = "0.1.0"
