"""Several runs of the example's transformers.Trainer script (examples/hf-trainer/train.py) in one
process: one torchrun start for many runs (tests/process/test_byo_trainer.py), as tests/byo_user_loop.py
does for its loop. Each run is the script's own main() with its own arguments, in turn.

    torchrun --standalone --nproc-per-node 2 byo_example_runs.py runs.json

runs.json: a JSON list of argument lists for train.py (e.g. ["--run-dir", "r/proc", "--mistake", "rank_seed"]).
Under torchrun the first run's TrainingArguments make the process group (accelerate); the runs after
it train in that group. Each main() seeds its own model, data order and Trainer from params.yaml.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hf-trainer"


def main() -> None:
    sys.path.insert(0, str(EXAMPLE))  # the script imports hfconfig from its folder
    import train

    runs = json.loads(Path(sys.argv[1]).read_text())
    for argv in runs:
        sys.argv = [str(EXAMPLE / "train.py"), *argv]
        train.main()


if __name__ == "__main__":
    main()
