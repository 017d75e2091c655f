"""Words of this repository that a user's project must never be shown (torch-free, pure).

What a user's run or check prints (stdout, stderr, reports/gates.json) speaks the user's language:
no issue numbers ("#54"), no shorthand of our own design notes ("the seed's T21", "seed design"), no
path or module of this repository ("docs/ddp-gate.md", "xtrain/core/train.py", "python -m
pipeline.repro") — none of those exist in the user's project. `internal_words(text)` lists every such
word found; a test runs it over the outputs of a user project's scenarios. It knows our top-level
folders by name: the user's own files (train.py, params.yaml, runs/proc/loss.csv, registry/) pass.
"""

from __future__ import annotations

import re

# Folders of this repository a user's project does not have (registry/, runs/, reports/: it does).
REPO_FOLDERS = ("docs", "xtrain", "gates", "runrecord", "params", "contracts", "pipeline", "tests", "ci", "bench", "examples")  # fmt: skip
# Modules of this repository named as commands or imports (`python -m pipeline.repro`).
# (`runrecord.hf` and `python -m registry bless` are the user's API and commands: not listed.)
REPO_MODULES = ("xtrain", "pipeline", "contracts", "params")

INTERNAL = re.compile(
    "|".join(
        (
            r"(?<![\w&#])#\d{1,4}\b",  # an issue or pull-request number: #54 (a colour #1565c0, #212121 is not)
            r"\bissue \d+\b",  # "issue 36"
            r"\bthe seed's\b|\bseed design\b",  # our first design's shorthand
            r"\bT\d{2}\b",  # its test items: T21
            r"(?<![\w./-])(?:" + "|".join(REPO_FOLDERS) + r")/(?:[\w./-]*[\w-])?",  # a path under our folders
            r"\b(?:" + "|".join(REPO_MODULES) + r")\.(?!yaml\b|json\b|csv\b|md\b|txt\b)[a-z_]+\b",
        )
    )
)


def internal_words(text: str) -> list[str]:
    """Every internal word or repository path in `text`, in order of appearance (empty: plain)."""
    return [m.group(0) for m in INTERNAL.finditer(text)]
