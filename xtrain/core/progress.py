"""Progress for rank 0: a tqdm bar on a terminal, plain lines in CI logs."""

from __future__ import annotations

import sys

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, initial: int, desc: str, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.bar = (
            tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)
            if self.tty
            else None
        )
        self.desc, self.total = desc, total

    def update(self, step: int, n: int, loss: float, lr: float, tok_s: float) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}")
        else:
            print(
                f"[{self.desc}] step {step}/{self.total} loss {loss:.4f} lr {lr:.2e} tok/s {tok_s:,.0f}",
                file=sys.stderr,
                flush=True,
            )

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(f"[{self.desc}] {text}")
        else:
            print(f"[{self.desc}] {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
