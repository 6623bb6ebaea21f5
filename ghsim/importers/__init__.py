"""Importers: real profiler traces into ghsim workloads (PyTorch profiler / Kineto so far)."""
