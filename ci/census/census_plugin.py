"""pytest plugin of a census run (`-p census_plugin`): each test's CPU, its own and that of the
processes it waited for, and its wall time, one JSON line per test to $XTRAIN_CENSUS_TESTS."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    (own, children), started = _cpu(), time.monotonic()
    yield
    path = os.environ.get("XTRAIN_CENSUS_TESTS")
    if not path:
        return
    own_after, children_after = _cpu()
    line = json.dumps(
        {
            "id": item.nodeid,
            "own": own_after - own,
            "children": children_after - children,
            "wall": time.monotonic() - started,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        }
    )
    with open(path, "a") as log:
        log.write(line + "\n")
