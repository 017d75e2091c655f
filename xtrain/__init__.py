"""xtrain: a small Qwen3-architecture training library with deterministic DDP launchers.

The package import is torch-free on purpose; torch is imported by the modules that need it.
"""

__version__ = "0.1.0"
