"""params.yaml on the ground floor (torch-free; imports only contracts): the one loader, the typed and
resolved configuration (thresholds included), config identity, eval cadence, worlds and pilot cells.

xtrain, registry and gates all read params through this package; it reads none of them.
"""
