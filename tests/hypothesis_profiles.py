"""Hypothesis settings for the property tests, one place: `ci` (the default: a small, fast sample
for every push) and `nightly` (HYPOTHESIS_PROFILE=nightly: ten times as many cases).

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
settings.register_profile("ci", max_examples=25, **_COMMON)
settings.register_profile("nightly", max_examples=250, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
