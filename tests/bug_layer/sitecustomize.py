"""Test-only: arms the bug that XTRAIN_TEST_PATCH names (xtrain_bugs.py) in this process, once it has
imported xtrain.core.launch. This folder is on PYTHONPATH only in the subprocesses a test starts with
xtrain_bugs.bug_env; a bad value stops the process at once (exit 2), before it trains anything."""

from __future__ import annotations

import os
import sys

if os.environ.get("XTRAIN_TEST_PATCH"):
    import importlib.abc
    import importlib.machinery

    import xtrain_bugs

    try:
        xtrain_bugs.parse(os.environ[xtrain_bugs.ENV])
    except ValueError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.stderr.flush()
        os._exit(2)  # site.py would print a SystemExit as a fatal error of the interpreter

    class _ArmAfterImport(importlib.abc.MetaPathFinder):
        """Runs xtrain.core.launch's module code, then arms the bug (its imports are loaded by then)."""

        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name != "xtrain.core.launch":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            if spec is None or spec.loader is None:
                return None
            run = spec.loader.exec_module

            def exec_module(module):  # type: ignore[no-untyped-def]
                run(module)
                xtrain_bugs.install(os.environ[xtrain_bugs.ENV])

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _ArmAfterImport())
