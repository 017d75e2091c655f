"""The classic DDP mistakes, planted in nanoGPT's train.py one at a time, with the diagnosis each must get.

A catalogue of text patches, applied to a COPY of the recorded train.py in a scratch folder (never to
the example's own file):

    from mistakes import CATALOGUE, MISTAKES, CONTROLS, AS_IS, Mistake, patched, scratch_copy

    for m in CATALOGUE:                      # MISTAKES, then CONTROLS
        folder = scratch_copy(m, tmp / m.name)   # train.py patched; model.py, configurator.py, config/,
        ...                                      # prepare.py and data/ (when prepared) copied beside it
        # run the copy on one device and under torchrun (the side m.side says), then gates check:
        # m.gate is None: every gate passes (a control); else gate m.gate fails and its message
        # contains m.phrase

`Mistake(name, patches, gate, phrase, side, what)`:
- `patches`: `(anchor, replacement)` pairs; `anchor` is exact text (one or more whole lines, without
  the final newline) that occurs exactly once in train.py, replaced by `replacement`. A patch whose
  anchor is missing or ambiguous raises `PatchError` (the catalogue is checked against the file).
- `gate`: the gate id expected to FAIL (`loss_match.proc`, `cross_rank.proc`), None for a control.
- `phrase`: a phrase of that gate's message (for a control: of loss_match.proc's PASS message).
- `side`: which run uses the patched copy: `proc` (the torchrun run; the single run uses the
  recorded train.py as it is; every mistake here is coded to act under DDP only, so it changes nothing
  on one device) or `both`.
- `what`: one line for a table.

`AS_IS` is not a mistake: nanoGPT left as it is (the same-batches lines reverted, each rank draws its
own batches from the global RNG seeded 1337 + rank), both sides; it must FAIL naming different samples.

Run `python3 mistakes.py` to print the catalogue and check every patch applies.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "train.py"
BESIDE = ("model.py", "configurator.py", "prepare.py", "config", "data")  # copied next to the patched train.py


class PatchError(ValueError):
    """An anchor that is not in train.py exactly once."""


@dataclass(frozen=True)
class Mistake:
    name: str
    patches: tuple[tuple[str, str], ...]
    gate: str | None
    phrase: str
    side: str = "proc"
    what: str = ""


SYNC = "            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)"
UNWRAP = "raw_model = model.module if ddp else model # unwrap DDP container if needed"
LR = "    lr = get_lr(iter_num) if decay_lr else learning_rate"
SCALE = "            loss = loss / gradient_accumulation_steps # scale the loss to account for gradient accumulation"
MEAN = "    if ddp: torch.distributed.all_reduce(loss_sum) # runrecord: the step's loss summed over ranks"
STEP = "    rec.step(loss=loss_sum.item() / ddp_world_size, grad_norm=grad_norm, lr=lr) # runrecord"

MISTAKES = [
    Mistake(
        "unsynced_grads",
        ((SYNC, "            model.require_backward_grad_sync = False # MISTAKE: gradients never all-reduced"),),
        "cross_rank.proc",
        "The ranks did not apply identical updates",
        what="require_backward_grad_sync False on every micro-step (no_sync always): no gradient all-reduce",
    ),
    Mistake(
        "init_after_wrap",
        ((UNWRAP, UNWRAP + "\nif ddp: raw_model.apply(raw_model._init_weights) # MISTAKE: per-rank init after the wrap"),),
        "loss_match.proc",
        "the gradients differ (grad_norm first out at step 0)",
        what="each rank re-initialises its weights (seed 1337 + rank) after DDP wrapped the model",
    ),
    Mistake(
        "lr_ahead_rank1",
        ((LR, "    lr = get_lr(iter_num + (seed_offset == 1)) if decay_lr else learning_rate # MISTAKE: rank 1 a step ahead"),),
        "cross_rank.proc",
        "The ranks did not apply identical updates",
        what="the LR schedule one step ahead on rank 1",
    ),
    Mistake(
        "accum_undivided_rank1",
        ((SCALE, SCALE.replace("loss / gradient_accumulation_steps", "loss / (1 if seed_offset == 1 else gradient_accumulation_steps)") + " # MISTAKE: not on rank 1"),),
        "loss_match.proc",
        "the gradients differ (grad_norm first out at step 0)",
        what="rank 1 does not divide its micro-batch loss by gradient_accumulation_steps",
    ),
    Mistake(
        "rank0_loss",
        (
            (MEAN, "    pass # MISTAKE: the logged loss is rank 0's, not the mean over ranks"),
            (STEP, STEP.replace("loss_sum.item() / ddp_world_size", "loss_sum.item()")),
        ),
        "loss_match.proc",
        "the logged training loss differs while the gradient norms and the validation",
        what="the logged loss is rank 0's only (no all-reduce of the loss)",
    ),
]

CONTROLS = [
    Mistake(
        "log_interval",
        (("log_interval = 1", "log_interval = 2 # CONTROL: prints every other step"),),
        None,
        "16 steps consumed exactly the single rows",
        what="log_interval 2 on the torchrun side only (a config key that changes no number)",
    ),
    Mistake(
        "sync_every_micro_step",
        ((SYNC, "            model.require_backward_grad_sync = True # CONTROL: all-reduce every micro-step"),),
        None,
        "16 steps consumed exactly the single rows",
        what="gradients all-reduced at every micro-step (slower, the same mean gradient)",
    ),
]

AS_IS = Mistake(
    "as_is",
    (
        ("eval_gen = torch.Generator().manual_seed(1337) # showcase same-batches: evaluation's own generator\n", ""),
        ("def get_batch(split, fetch=None): # showcase same-batches: fetch = the training micro-batch's number",
         "def get_batch(split):"),
        ("""    if fetch is None: # showcase same-batches: evaluation draws from eval_gen, not the global RNG dropout shares
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=eval_gen)
    else: # showcase same-batches: the step's global batch from a generator seeded by the step, then this rank's share
        step, micro = divmod(fetch, gradient_accumulation_steps)
        ix = torch.randint(len(data) - block_size, (ddp_world_size * gradient_accumulation_steps * batch_size,), generator=torch.Generator().manual_seed(1337 + step))
        ix = ix.view(-1, batch_size)[seed_offset * gradient_accumulation_steps + micro] # seed_offset: the rank""",
         "    ix = torch.randint(len(data) - block_size, (batch_size,))"),
        ("X, Y = get_batch('train', 0) # fetch the very first batch", "X, Y = get_batch('train') # fetch the very first batch"),
        ("        X, Y = get_batch('train', iter_num * gradient_accumulation_steps + micro_step + 1)",
         "        X, Y = get_batch('train')"),
    ),
    "loss_match.proc",
    "samples differ",
    side="both",
    what="nanoGPT as it is: each rank draws its own batches (global RNG seeded 1337 + rank)",
)

CATALOGUE = MISTAKES + CONTROLS


def patched(mistake: Mistake, text: str | None = None) -> str:
    """train.py's text (default: the example's) with the mistake's patches applied, in order."""
    text = TRAIN.read_text() if text is None else text
    for anchor, replacement in mistake.patches:
        n = text.count(anchor)
        if n != 1:
            raise PatchError(f"{mistake.name}: anchor {anchor.strip()[:60]!r} occurs {n} times in train.py, not once")
        text = text.replace(anchor, replacement)
    return text


def scratch_copy(mistake: Mistake | None, folder: Path) -> Path:
    """A runnable copy in `folder` (created): train.py with `mistake` planted (None: as recorded) and
    the files it reads beside it. Returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in BESIDE:
        src = HERE / name
        if src.is_dir():
            shutil.copytree(src, folder / name, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, folder / name)
    (folder / "train.py").write_text(patched(mistake) if mistake else TRAIN.read_text())
    return folder


def main() -> int:
    for m in [*CATALOGUE, AS_IS]:
        patched(m)  # raises PatchError if an anchor moved
        expect = f"FAIL {m.gate}: {m.phrase!r}" if m.gate else f"PASS: {m.phrase!r}"
        print(f"{m.name:24} {m.side:5} {expect}\n{'':31}{m.what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
