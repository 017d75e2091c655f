"""Stages `train_single`, `train@thread`, `train@proc`: the launchers of xtrain.launch.

python -m pipeline.train single
python -m pipeline.train thread
torchrun --standalone --nproc-per-node 2 -m pipeline.train proc
"""

from __future__ import annotations

import sys

from xtrain.launch import main

if __name__ == "__main__":
    sys.exit(main())
