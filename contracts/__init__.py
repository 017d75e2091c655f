"""contracts: the ground floor every other package stands on (torch-free, imports nothing of the project).

Every JSON Schema (`contracts/schemas/`), the validator with one-line errors (`validate.py`), atomic
file writes and hashes (`fileio.py`), the one error path of every command line (`errors.py`), and the
artifact table with `write()` / `read()` that both validate (`artifacts.py`).
"""
