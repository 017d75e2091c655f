"""The registry: blessed export versions, per-environment goldens and pinned checkpoints (torch-free).

Code lives beside the data it guards: store.py reads and writes registry/models, registry/goldens
and registry/pinned; `python -m registry` is the command line.
"""
