"""Record any training loop as the run record the gates judge (runs/<launcher>/metrics.json).

Public, versioned API (API_VERSION; docs/byo-trainer.md): a user's loop depends on it.

    from runrecord import RunRecorder
    rec = RunRecorder(config={"seed": 0, "model": {...}, "train": {"steps": N, ...}},
                      tokens_per_step=B * T, model=model, run_dir="runs/proc")   # before DDP wraps it
    if rank == 0:
        rec.eval(step=0, loss=val_loss)              # before training; any steps, rank 0 or every rank
    for step, (sample_ids, batch) in enumerate(loader):
        rec.samples(sample_ids)                      # this rank's dataset indices, before the forward
        ...
        rec.step(loss=loss.item(), grad_norm=norm.item(), lr=lr)   # mean loss over ranks, norm before clipping
        if (step + 1) % eval_interval == 0 and rank == 0:   # or rec.eval_due(step + 1) (train.eval_every)
            rec.eval(step=step + 1, loss=val_loss)
    rec.finish()                                     # every rank calls it; rank 0 writes, staged

The config is what determines the numbers (its identity, params/identity.py, is the run's config_hash);
the gates take the run's length from its `train.steps` and its eval steps from rank 0's rec.eval calls
(compared at the steps both runs have). With
`model=`, the recorder records the model's train mode at every step and seeds its `nn.Dropout` masks
per sample (`dropout="off"`: switched off for the equivalence runs), so the DDP gate judges dropout
and train mode too. Every value is checked where it arrives (RunRecordError, one line; uncaught, one
line on stderr and exit 2, not a traceback: runrecord/one_line.py); the run folder
goes through the project's output guard. Adapters: `runrecord.hf` (a transformers TrainerCallback
and an indexed collator). Under torchrun the recorder uses the initialised torch.distributed group
(gloo or NCCL) for its few collectives, all at finish(): nothing is communicated per step.
"""

from runrecord.arguments import RunRecordError
from runrecord.recorder import API_VERSION, RunRecorder

__all__ = ["API_VERSION", "RunRecordError", "RunRecorder"]
