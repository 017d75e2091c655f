"""The pilot's feature cells (torch-free): what each cell turns on, what it is judged against, and how.

The seed design found its worst bug (T21: dropout silently off under DDP) only in a full-stack pilot
run. The pilot stage (pipeline/pilot.py) trains every cell of the active profile for a few steps
through every launcher; gates/judges/pilot.py judges them. Every cell starts from the pilot base: the
profile's config with every feature off, `pilot.steps` steps, one eval at step 0 and one at the end.

Judges (what a cell's run is compared with, per launcher, besides its own single-device run):
- `exact`: bitwise the reference run of the same launcher (recompute: gradients and every loss;
  resume: the uninterrupted run).
- `equivalent`: the reference within the DDP gate's checks (same samples and dropout masks, step 0
  tight, prefix bound): grad accumulation, fused AdamW, compile, bf16, every feature at once.
- `differs`: dropout: masks drawn at every step, none in the reference, and the step-0 loss moved
  by more than `min_effect` (the seed's T21 regression test: p > 0 differs from p = 0).

Eval at step 0 (before any update) is an identity for a cell whose config differs from its
reference's only in keys the eval forward never reads (EVAL_INERT): dropout and attention dropout
(off in eval mode), recompute (taken only in training), grad_accum and the optimizer (training only),
the checkpoint cadence. Its step-0 val loss must then equal the reference's bitwise on the same
launcher (eval_identity; the gate's "eval at step 0" check): dropout, grad_accum, grad_accum4,
recompute, fused_adamw, resume, and `all` on cpu. Not bf16 (autocast changes the eval numerics),
not `all` on cuda (bf16 there), not compile: evaluate() runs the eager model today, but evaluating
the compiled module would be a correct change with other kernels, so no identity is claimed; their
step-0 val loss is judged within first_step_rtol like the rest of step 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from params.config import Params, resolve

BASE = "base"


@dataclass(frozen=True)
class Cell:
    name: str
    sets: tuple[str, ...]  # overrides on top of the pilot base
    reference: str  # the cell its runs are compared with (same launcher)
    judge: str  # exact | equivalent | differs
    what: str


DROPOUT_SETS = ("model.dropout=0.1", "model.attn_dropout=0.1")

CELLS: dict[str, Cell] = {
    c.name: c
    for c in (
        Cell(BASE, (), BASE, "exact", "every feature off: the reference of the other cells"),
        Cell("dropout", DROPOUT_SETS, BASE, "differs", "residual and attention dropout 0.1"),
        Cell("grad_accum", ("train.grad_accum=2",), BASE, "equivalent", "2 micro-batches per step"),
        Cell("grad_accum4", ("train.grad_accum=4",), BASE, "equivalent", "4 micro-batches per step"),
        Cell("recompute", ("model.recompute=true",), BASE, "exact", "activation recompute per block"),
        Cell("fused_adamw", ("train.fused_adamw=true",), BASE, "equivalent", "the fused AdamW kernel"),
        Cell(
            "compile",
            ("train.compile=true", "train.compile_mode=default"),
            BASE,
            "equivalent",
            "torch.compile, default mode",
        ),
        Cell("bf16", ("train.precision=bf16",), BASE, "equivalent", "bf16 autocast, fp32 master weights"),
        Cell("resume", (), BASE, "exact", "stopped at pilot.resume_at, resumed from its checkpoint"),
        Cell(
            "all",
            (*DROPOUT_SETS, "train.grad_accum=2", "model.recompute=true", "train.fused_adamw=true"),
            "dropout",
            "equivalent",
            "every feature at once (dropout, grad_accum 2, recompute, fused AdamW; on cuda also bf16)",
        ),
    )
}

# What every cell turns off first, so a profile's own settings (the GPU profile's bf16 and fused
# AdamW) never leak into the base.
FEATURES_OFF = (
    "model.dropout=0.0",
    "model.attn_dropout=0.0",
    "model.recompute=false",
    "train.grad_accum=1",
    "train.compile=false",
    "train.fused_adamw=false",
    "train.precision=fp32",
)
# The seed's full-stack pilot on cuda: bf16 too. Not compile: the dropout masks' per-row generators
# break its graphs, and it has its own cell.
CUDA_ALL = ("train.precision=bf16",)


# The config keys the eval forward never reads (module docstring): a cell that differs from its
# reference only in these must evaluate bitwise like it before the first update.
EVAL_INERT = frozenset(
    {
        "model.dropout",
        "model.attn_dropout",
        "model.recompute",
        "train.grad_accum",
        "train.fused_adamw",
        "train.ckpt_every",
    }
)


def pilot_section(params: Params) -> dict:
    if "pilot" not in params.raw:
        raise KeyError("params.yaml: pilot: missing: the pilot stage needs a pilot: section")
    return params.raw["pilot"]


def cells_for(params: Params) -> list[str]:
    """The cells of the active profile (params.yaml pilot.cells.<profile>), reference cells first."""
    names = list(pilot_section(params)["cells"].get(params["profile"], []))
    wanted = [BASE] if names else []
    for n in names:
        ref = CELLS[n].reference
        for c in (ref, n):
            if c not in wanted:
                wanted.append(c)
    return wanted


def base_sets(params: Params) -> list[str]:
    """The pilot base on top of the profile: features off, pilot.steps, evals at 0 and the end."""
    p = pilot_section(params)
    steps = p["steps"]
    t = params["train"]
    return [
        *FEATURES_OFF,
        f"train.steps={steps}",
        f"train.warmup_steps={min(t['warmup_steps'], steps)}",
        f"train.eval_every={steps}",
        f"train.log_every={steps}",
        "train.ckpt_every=0",
        *p.get("sets", {}).get(params["profile"], []),
    ]


def cell_sets(params: Params, cell: str) -> list[str]:
    c = CELLS[cell]
    sets = [*base_sets(params), *c.sets]
    if cell == "all" and params["train"]["device"] == "cuda":
        sets += CUDA_ALL
    if cell == "resume":
        sets.append(f"train.ckpt_every={pilot_section(params)['resume_at']}")  # bookkeeping only
    return sets


def cell_params(params: Params, cell: str) -> Params:
    """The resolved params a cell's runs train with (validated like params.yaml itself). Resolved once
    per Params: a `gates check` asks for each cell's params about six times, ~20 ms each."""
    if cell not in params.resolved_cells:
        params.resolved_cells[cell] = resolve(
            params.raw, f"{params.source} (pilot cell {cell})", cell_sets(params, cell)
        )
    return params.resolved_cells[cell]


def config_diff(params: Params, cell: str, other: str) -> set[str]:
    """The model.* and train.* keys whose resolved values differ between two cells."""
    a, b = cell_params(params, cell), cell_params(params, other)
    return {
        f"{section}.{k}"
        for section in ("model", "train")
        for k in a[section]  # both resolved against one schema: the same keys
        if a[section].get(k) != b[section].get(k)
    } | ({"seed"} if a["seed"] != b["seed"] else set())


def eval_identity(params: Params, cell: str) -> bool:
    """Whether the cell's step-0 val loss must equal its reference cell's bitwise (module docstring)."""
    ref = CELLS[cell].reference
    return ref != cell and config_diff(params, cell, ref) <= EVAL_INERT
