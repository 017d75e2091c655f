"""pytest plugin for mutation runs of the judge (tests/judge_mutation.py loads it with -p).

Registers the Hypothesis profile `judge-mutation` before tests/hypothesis_profiles.py loads the one
HYPOTHESIS_PROFILE names: the `ci` sample sizes, derandomized (a mutant's verdict does not depend on
the draw, so a report and a CI run are reproducible) and without shrinking (a failing example kills
the mutant; making it minimal only costs time, up to ~30 s per killed mutant).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "judge-mutation",
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
