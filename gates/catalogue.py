"""The catalogue: every hard gate, its threshold, and what it checks, why, and how to investigate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gates import (
    closed_loop,
    consistency,
    ddp,
    export_gguf,
    export_md5,
    fresh_train,
    perf,
    pilot,
    probes,
    scaling,
    seals,
    training,
)
from gates.artifacts import Artifacts
from gates.outcome import Outcome

Thresholds = dict[str, Any]


@dataclass(frozen=True)
class Gate:
    id: str
    checks: str
    threshold: Callable[[Thresholds], str]
    run: Callable[[Artifacts, Thresholds], Outcome]
    why: str
    investigate: str


def _loss_match(launcher: str) -> Gate:
    return Gate(
        id=f"loss_match.{launcher}",
        checks=f"the {launcher}-per-rank DDP run against single-device training of the same config: the "
        "samples and dropout masks of every step (exact), step 0 (summation order), the loss over a prefix, "
        "the final validation loss",
        threshold=lambda t: ddp.describe_tiers(t["loss_match"]),
        run=lambda a, t: ddp.loss_match(a, launcher, t["loss_match"]),
        why="data parallelism must not change the math: averaged shard gradients equal the full-batch gradient "
        "up to float summation order; past a few dozen steps on the GPU profile that order is amplified "
        "chaotically, so only exact and early checks are tight (docs/ddp-gate.md)",
        investigate=f"the message names the failing check. samples: xtrain/data.py sharding. first step: the "
        f"reduction (xtrain/comm.py), sharding or dropout; a grad_norm[0] ratio of world means a sum, not a "
        f"mean. prefix: the first step over the bound; end only: rerun with other seeds. Files: "
        f"runs/single/loss.csv, runs/{launcher}/loss.csv",
    )


def _cross_rank(launcher: str) -> Gate:
    return Gate(
        id=f"cross_rank.{launcher}",
        checks=f"max |p_rank - p_0| over all ranks and tensors after the last {launcher} step",
        threshold=lambda t: f"< {t['cross_rank']['max_abs']:g}",
        run=lambda a, t: training.cross_rank(a, launcher, t["cross_rank"]["max_abs"]),
        why="replicas that drift apart silently train different models; the seed design found bitwise equality "
        "flaky on NCCL and gates at 1e-6",
        investigate=f"runs/{launcher}/metrics.json cross_rank.per_rank names the rank; check that every rank "
        f"applies the same averaged gradient and optimizer step (comm.sync_grads, DDP buckets)",
    )


def _pilot(cell: str) -> Gate:
    return Gate(
        id=f"pilot.{cell}",
        checks=f"the pilot cell {cell} ({pilot.CELLS[cell].what}) on every launcher of pilot.launchers: the "
        f"DDP gate against the cell's single-device run, and the feature against cell "
        f"{pilot.CELLS[cell].reference} on the same launcher ({pilot.CELLS[cell].judge})",
        threshold=lambda t: pilot.threshold_text(t["pilot"], cell) if "pilot" in t else "gates.pilot missing",
        run=lambda a, t: pilot.cell_gate(a, cell, t.get("pilot")),
        why="the pipeline's runs never take the feature paths (dropout, grad accumulation, recompute, resume, "
        "fused AdamW, compile, bf16): a bug there passes every other gate, as dropout silently off under DDP "
        "did in the seed design (T21); docs/pilot.md",
        investigate=f"the message names the launcher and the check; runs/pilot/{cell}/<launcher>/loss.csv "
        f"against runs/pilot/{pilot.CELLS[cell].reference}/<launcher>/loss.csv; rerun one cell with "
        f"python -m pipeline.pilot --cells {cell}",
    )


SEALS = Gate(
    id="seals",
    checks="dvc.lock records every stage and out of dvc.yaml; every out (each file of a folder out), "
    "and every folder dep such as registry/models, equals its dvc.lock md5",
    threshold=lambda t: "every file equal to dvc.lock",
    run=lambda a, t: seals.seals(a),
    why="a gate reads some files of some outs: a tampered checkpoint, csv, report or token file would "
    "otherwise pass unseen, and a deleted dvc.lock (or entry) would switch every artifact check off",
    investigate="the message names each file and both md5s; dvc status says which stage is stale; "
    "dvc repro it, or restore the file (dvc checkout) and dvc.lock (git checkout dvc.lock)",
)

GATES: list[Gate] = [
    SEALS,
    Gate(
        id="consistency",
        checks="each run agrees with itself: summary.json, loss.csv, eval.csv are what metrics.json gives; "
        "its param_digest is the digest of its final checkpoint (recomputed from model.safetensors)",
        threshold=lambda t: "equal",
        run=lambda a, t: consistency.consistency(a),
        why="dvc.lock seals each file alone; someone who rewrites dvc.lock, or a writer that mixed two runs, "
        "can still leave files that disagree: recomputation catches what re-sealing hides",
        investigate="the message names the run and file; dvc repro -f the run's stage",
    ),
    _loss_match("thread"),
    _loss_match("proc"),
    Gate(
        id="launcher_parity",
        checks="the process-per-rank (torchrun) trajectory against the thread-per-rank one",
        threshold=lambda t: (
            "as loss_match, thread as the reference: "
            + ddp.describe_tiers({**t["loss_match"], "max_rel": t["launcher_parity"]["max_rel"]})
        ),
        run=lambda a, t: ddp.launcher_parity(a, t["loss_match"], t["launcher_parity"]["max_rel"]),
        why="the two launchers must differ only in how ranks start and how gradients travel (seed design: "
        "1.5e-7); at world 4 on H200s their reductions sum in other orders, so a whole-run bound is unsound",
        investigate="same world and config? (metrics.json world, config_hash). On CPU they are bit-identical: "
        "a samples or step-0 failure means the gradient path changed (DDP bucket order, reduction, sharding)",
    ),
    _cross_rank("thread"),
    _cross_rank("proc"),
    Gate(
        id="export_md5",
        checks="the re-export of the registry's pinned checkpoint against the md5s of its blessed version",
        threshold=lambda t: "every file equal",
        run=lambda a, t: export_md5.export_md5(a),
        why="the export must be byte-deterministic on any machine, even where fresh training is not bitwise",
        investigate="python -m registry verify exports/pinned lists each file's expected and actual md5; "
        "config.json changes come from xtrain/export.py, model.safetensors from dtype or tensor "
        "naming; bless an intended change with python -m registry bless --reason '...'",
    ),
    Gate(
        id="fresh_train",
        checks="this run's single-device loss trajectory and export md5 against the golden of its environment",
        threshold=lambda t: (
            "exact (own environment's golden) or approximate (another's): "
            + ", ".join(
                f"{d} {fresh_train.approx_threshold(v)}"
                for d, v in sorted(t["fresh_train"]["approx"].items())
            )
        ),
        run=lambda a, t: fresh_train.fresh_train(a, t["fresh_train"]),
        why="Megatron-LM style goldens per environment: an identical environment trains bitwise (exact tier); "
        "another CPU model or GPU is judged against the same config's golden within tolerances (approximate)",
        investigate="runs/single/metrics.json env.env_id picks registry/goldens/<env_id>/; the message names the "
        "golden, the tier and the first differing step. Bisect the code change with `dvc repro train_single`; bless a new golden "
        "only for an understood change",
    ),
    Gate(
        id="closed_loop",
        checks="transformers and ONNX Runtime reproduce our logits and greedy tokens on exports/fresh, "
        "recomputed from the report's raw numbers; each engine's negative control (one tensor perturbed) "
        "moved the logits beyond the tolerance; the report covers every export file at its current md5",
        threshold=lambda t: "params closed_loop.logits_atol_<dtype> (ONNX Runtime: fp32), tokens identical",
        run=lambda a, t: closed_loop.closed_loop(a),
        why="independent readers prove the export computes what we trained, not just that it loads",
        investigate="reports/closed_loop.json: engines.<engine>.check.samples[] (first_mismatch, per-prompt "
        "diffs), missing/unexpected keys; dvc repro -f closed_loop (python -m pipeline.closed_loop) reruns it",
    ),
    Gate(
        id="export_gguf",
        checks="model.gguf of exports/fresh and exports/pinned, read back with GGUFReader: every tensor "
        "equals model.safetensors (float32 bit patterns), metadata equals config.json and tokenizer.json",
        threshold=lambda t: "every tensor bitwise, metadata equal",
        run=lambda a, t: export_gguf.export_gguf(a),
        why="llama.cpp users get the GGUF, not the safetensors: it must hold the same model",
        investigate="the message names the tensor or key; xtrain/gguf_export.py writes them, "
        "gguf.constants MODEL_ARCH.QWEN3 names them",
    ),
    Gate(
        id="model_probes",
        checks="runs/probes.json: the attention-dropout path at p=0 equals SDPA (GQA) to fp32 rounding; "
        "dropout on ones keeps the mean 1 and drops a fraction p (binomial z-scores)",
        threshold=lambda t: probes.THRESHOLD,
        run=lambda a, t: probes.model_probes(a),
        why="dropout is 0 in every profile and the pilot compares launchers with each other: a feature-path "
        "bug every launcher shares passes every other gate (issue #24's campaign found two)",
        investigate="python -m pipeline.probes --out /tmp/p.json; the message names the path "
        "(xtrain/model.py Attention._attention_with_dropout or Dropout)",
    ),
    Gate(
        id="finite",
        checks="no NaN or Inf in any loss, eval loss or grad norm of any run",
        threshold=lambda t: "all finite",
        run=lambda a, t: training.finite(a),
        why="a diverged run can still produce files; it must never pass",
        investigate="the message names the run, series and first step; lower the learning rate or check precision",
    ),
    Gate(
        id="scaling",
        checks="bench/scaling.json: every world present for each launcher, speedup(w) >= floor(w), "
        "thread and proc throughput within a band",
        threshold=lambda t: (
            "speedup floors and band of the measured profile (" + ", ".join(t["scaling"]) + ")"
        ),
        run=lambda a, t: scaling.scaling(a, t["scaling"]),
        why="a change that keeps numerics but loses throughput at scale is still a regression",
        investigate="bench/scaling.png; rerun one launcher/world with python -m pipeline.scaling; on GPU profile "
        "the step (python -m pipeline.bench) and the all-reduce overlap",
    ),
    Gate(
        id="perf.throughput",
        checks="median steady tokens/s of each training stage (recomputed from the raw windows) against the "
        "blessed perf baseline of its environment",
        threshold=lambda t: perf.threshold_text(
            t, "95% CI of the change wholly slower than {slowdown}: fail; straddling it: inconclusive"
        ),
        run=lambda a, t: perf.throughput(a, t),
        why="a change that keeps the numerics but trains slower is a regression users feel first",
        investigate="runs/<launcher>/metrics.json perf.windows (seconds per logged window); the step with "
        "python -m pipeline.bench --profile; git bisect with python -m gates bisect GOOD BAD --gate "
        "perf.throughput; bless an understood change with python -m registry bless --perf --reason '...'",
    ),
    Gate(
        id="perf.memory",
        checks="peak memory per rank of each training stage (CUDA max_memory_allocated, CPU max RSS) "
        "against the blessed perf baseline of its environment",
        threshold=lambda t: perf.threshold_text(t, "growth <= {memory_growth}"),
        run=lambda a, t: perf.memory(a, t),
        why="memory growth turns into out-of-memory at the next larger batch or model",
        investigate="runs/<launcher>/metrics.json perf.peak_memory; on CUDA torch.cuda.memory_summary or the "
        "memory snapshot of one step (activations, optimizer state, allocator cache)",
    ),
    *(_pilot(cell) for cell in pilot.CELLS),
]


def select(only: list[str] | None) -> list[Gate]:
    """Gates whose id equals or starts with one of `only` (e.g. `loss_match` selects both launchers);
    the seals gate always (over the selected gates' stages): no selection turns dvc.lock's check off."""
    if not only:
        return GATES
    chosen = [g for g in GATES if any(g.id == o or g.id.startswith(o + ".") for o in only)]
    unknown = [o for o in only if not any(g.id == o or g.id.startswith(o + ".") for g in GATES)]
    if unknown:
        raise KeyError(f"unknown gate {', '.join(unknown)} (known: {', '.join(g.id for g in GATES)})")
    return chosen if SEALS in chosen else [SEALS, *chosen]


def stages_of(gates: list[Gate]) -> list[str] | None:
    """The DVC stages the gates read (None: every stage, for a full check or a gate without a map)."""
    from gates.bisect import BisectError, stages_for

    if gates == GATES:
        return None
    stages: set[str] = set()
    for g in gates:
        if g is SEALS:
            continue
        try:
            found = stages_for(g.id)
        except BisectError:
            return None
        if not found:
            return None
        stages.update(found)
    return sorted(stages)


def get(gate_id: str) -> Gate:
    for g in GATES:
        if g.id == gate_id:
            return g
    raise KeyError(f"unknown gate {gate_id} (known: {', '.join(g.id for g in GATES)})")
