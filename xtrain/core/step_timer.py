"""The step timer: training time in windows (one per read-back of the losses), pauses left out.

The first window holds compilation and allocator warm-up, so it is timed but not steady: steady
throughput counts the later windows only. Evaluation and checkpointing run inside `paused()` and
are not training time. `sync` waits for the device, so a window ends when its work has finished.
Torch-free: the caller passes the device sync.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any


class StepTimer:
    def __init__(self, sync: Callable[[], None], tokens_per_step: int) -> None:
        self.sync, self.tokens_per_step = sync, tokens_per_step
        self.windows: list[dict[str, Any]] = []
        self.train_time = self.steady_time = 0.0
        self.steady_tokens = 0
        self._tick = 0.0

    def start(self) -> None:
        self.sync()
        self._tick = time.perf_counter()

    def close_window(self, first_step: int, steps: int) -> float:
        """End the window of `steps` steps from `first_step` (after a device sync); its seconds."""
        self.sync()
        now = time.perf_counter()
        seconds, self._tick = now - self._tick, now
        self.train_time += seconds
        if self.windows:  # not the first (warm-up) window
            self.steady_time += seconds
            self.steady_tokens += steps * self.tokens_per_step
        self.windows.append({"first_step": first_step, "steps": steps, "seconds": seconds})
        return seconds

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent in the block is not training time (the open window resumes after it)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._tick += time.perf_counter() - start

    def tokens_per_s(self, tokens: int) -> float:
        return tokens / max(self.train_time, 1e-9)

    def steady_tokens_per_s(self, tokens: int) -> float:
        """Throughput without the warm-up window; all windows when there is only one."""
        return self.steady_tokens / self.steady_time if self.steady_time > 0 else self.tokens_per_s(tokens)
