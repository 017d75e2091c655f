"""Hypothesis settings for the property tests, one place: `ci` (the default: a small, fast sample
for every push) and `nightly` (HYPOTHESIS_PROFILE=nightly: ten times as many cases), loaded by
tests/conftest.py before any test module; `examples` gives a costly test its own sizes.

No example database: a failure prints its example (and `@reproduce_failure` blob); the test keeps
it as an `@example` regression case.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,  # each case runs real gates on a loaded 2-core box: timing is not the property
    "database": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.register_profile("ci", max_examples=25, **_COMMON)
settings.register_profile("nightly", max_examples=250, **_COMMON)
settings.load_profile(PROFILE)


def examples(ci: int, nightly: int) -> settings:
    """A test's own sample size per profile. A test whose every case starts processes (a gates check,
    a torchrun launch) takes a bounded nightly sample: such tests sit in serial xdist groups, where
    their cases add up to the nightly's wall time (the proctree property at 40 cases was ~7 min of
    torchrun launches on the H200 runner). Each night still draws new cases (no example database)."""
    return settings(max_examples=nightly if PROFILE == "nightly" else ci, **_COMMON)
