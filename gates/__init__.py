"""gates: every hard gate of xtrain-gates as a schema-validated check over artifact files.

Torch-free by design: `python -m gates check` reads files and runs anywhere in about a second.
"""
