"""DDP equivalence: a DDP run against single-device training of the same config (loss_match.*).

A loss trajectory is chaotic on the GPU profile: equivalent reorderings (DDP, grad accumulation,
fp32 vs bf16) start ~1e-7 apart and cross 1e-3 relative around steps 23-32. So the gate checks
what survives chaos exactly or tightly, and bounds only the rest statistically:

1. samples and dropout masks (exact): per step, the rows the ranks consumed (count and hash sum,
   xtrain/core/data.py) equal the single-device batch (shards disjoint, union the whole batch), and the
   dropout masks drawn (hash sum of their seeds, xtrain/core/model.py) equal single-device's.
2. first step (tight): identical parameters, so loss[0], grad_norm[0] (before clipping) and the
   step-0 validation loss differ by float summation order only: rel <= first_step_rtol.
3. prefix (the user's bound): max rel <= max_rel over the first K steps and the evals inside them,
   before chaos amplifies one-ulp differences (K = every step on CPU).
4. end of run: |final val loss - single's| <= final_val_atol, from the measured spread of
   equivalent reorderings on that tier.
5. observed (exact): what the runs did (rows and tokens per step, the lr at every step, the
   parameters' count, shapes and initial digest), never their configs' text: a config difference
   that changes none of it is information, one that does is named with it (cosmetic keys never are).

Evals are compared at the steps both runs evaluated at (a loop of its own evaluates where it does,
on rank 0 alone or every rank): step 0 if both have it, the prefix's common steps, and the end at
the last common step; two runs without one common eval step are named as such.

Tiers are keyed by the run's device (metrics.json `device`) in params.yaml gates.loss_match; each
bound is a tolerance of gates/judges/tolerance.py (Exact for 1, Approx for 2-4: |x - ref| <= atol + rtol|ref|).
Pure functions of the two metrics dicts; never imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, rel_diffs
from gates.judges.tolerance import Approx, Exact
from gates.judges.training import foreign_recorder, pairs, refuse_runs, with_train_mode
from gates.reading.runs import Runs, read_launcher_parity, read_loss_match
from params.identity import config_changes, describe_changes, is_cosmetic

Metrics = dict[str, Any]
EXACT = Exact()  # sample and dropout-mask fingerprints: integers, equal or not


@dataclass(frozen=True)
class Tier:
    """One device's tolerances (gates/judges/tolerance.py), built from params.yaml gates.loss_match."""

    device: str
    first_step: Approx  # Approx.relative(<device>.first_step_rtol): loss[0], grad_norm[0], val@0
    prefix_steps: int | None  # <device>.prefix_steps; None: every step
    prefix: Approx  # Approx.relative(max_rel): every train loss and eval inside the prefix
    end: Approx  # Approx.absolute(<device>.final_val_atol): the final validation loss

    def describe(self, steps: int) -> str:
        k = steps if self.prefix_steps is None else min(self.prefix_steps, steps)
        return (
            f"samples exact; step 0 rel <= {self.first_step.rtol:g}; max rel <= {self.prefix.rtol:g} over "
            f"{k} of {steps} steps; |final val diff| <= {self.end.atol:g} ({self.device} tier)"
        )


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    applied: bool = True  # False: the records cannot say (detail says why); never counted as held


def own_trainer(*runs: Metrics) -> bool:
    """Some run was written by another trainer (runrecord): hints name the user's side, not xtrain's files."""
    return any(foreign_recorder(m) for m in runs)


def tier_for(loss_match: dict[str, Any], device: str) -> Tier | None:
    t = loss_match.get(device)
    if t is None:
        return None
    return Tier(
        device,
        first_step=Approx.relative(t["first_step_rtol"]),
        prefix_steps=t["prefix_steps"],
        prefix=Approx.relative(loss_match["max_rel"]),
        end=Approx.absolute(t["final_val_atol"]),
    )


def shape_problem(single: Metrics, ddp: Metrics, run: str, ref: str = "single") -> str | None:
    """Why the two runs cannot be compared step by step at all, or None. Their configs are not
    compared here: check_observed judges what the runs did and names the config keys behind it."""
    for m, name in ((single, ref), (ddp, run)):
        n = m["steps"]
        lengths = {
            "train_loss": len(m["train_loss"]),
            "grad_norm": len(m["grad_norm"]),
            "lr": len(m["lr"]),
            "samples.count": len(m["samples"]["count"]),
            "samples.hash_sum": len(m["samples"]["hash_sum"]),
            "samples.dropout_hash_sum": len(m["samples"]["dropout_hash_sum"]),
        }
        short = {k: v for k, v in lengths.items() if v != n}
        if short:
            k, v = next(iter(short.items()))
            return f"runs/{name}/metrics.json: {k} has {v} entries for {n} steps (a resumed old run?)"
    if single["steps"] != ddp["steps"]:
        changes = config_changes(single["config"], ddp["config"])
        keys = f" (config: {describe_changes(changes)})" if changes else ""
        return (
            f"runs/{run} trained {ddp['steps']} steps, runs/{ref} {single['steps']}{keys}: train both as long"
        )
    if single["device"] != ddp["device"] or single["precision"] != ddp["precision"]:
        return (
            f"runs/{run} ran on {ddp['device']}/{ddp['precision']}, runs/{ref} on "
            f"{single['device']}/{single['precision']}"
        )
    if ref != "single" and single["world"] != ddp["world"]:
        return f"runs/{run} ran at world {ddp['world']}, runs/{ref} at world {single['world']}: set one world"
    return None


# What a run did, as its record says, quantity by quantity: (name, metrics key, per step, hint). The
# DDP comparison rests on these, never on the configs' text (docs/ddp-gate.md "Observed quantities").
OBSERVED = (
    ("rows per step", ("samples", "count"), True, "each rank reads its share of the step's global batch: "
     "divide the gradient accumulation (or the batch) by the world size"),
    ("tokens per step", ("tokens_per_step",), False, "the tokens one optimizer step trains over all ranks"),
    ("lr per step", ("lr",), True, "the lr schedule must follow the optimizer step, stepped once per step"),
    ("parameter count", ("n_params",), False, "another model"),
    ("parameter shapes", ("param_shapes_digest",), False, "another model: names or shapes differ"),
    ("initial parameters", ("init_param_digest",), False, "other weights before the first step: the "
     "seed or the init differs (under DDP, rank 0's weights are broadcast at the wrap)"),
)  # fmt: skip


def observed(m: Metrics, path: tuple[str, ...]) -> Any:
    """The record's value at `path`, or None where it was not recorded (older records: no digests)."""
    value: Any = m
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def observed_difference(got: Any, ref: Any, per_step: bool) -> str | None:
    """How one observed quantity differs (`got` vs `ref`), or None: equal, or not recorded by both."""
    if got is None or ref is None or got == ref:
        return None
    if not per_step:
        shown = [v[:8] if isinstance(v, str) else v for v in (got, ref)]  # digests: their first 8 hex
        return f"{shown[0]} vs {shown[1]}"
    bad = [i for i, (a, b) in enumerate(zip(got, ref, strict=True)) if a != b]
    i = bad[0]
    return f"{got[i]!r} vs {ref[i]!r} at step {i}" + (f" (and {len(bad) - 1} more steps)" if bad[1:] else "")


def check_observed(
    single: Metrics, ddp: Metrics, run: str, ref: str = "single", cosmetic: tuple[str, ...] = ()
) -> Check:
    """Exact: what the runs did (OBSERVED) agrees; a config difference that changes none of it is
    information, one that does is named with the quantity it changed."""
    changes = config_changes(single["config"], ddp["config"])
    causes = [c for c in changes if not is_cosmetic(c[0], cosmetic)]
    diffs, unrecorded = [], []
    for name, path, per_step, hint in OBSERVED:
        got, want = observed(ddp, path), observed(single, path)
        if got is None or want is None:
            unrecorded.append(name)
        elif (d := observed_difference(got, want, per_step)) is not None:
            diffs.append((name, d, hint))
    if not diffs:
        seen = [name for name, *_ in OBSERVED if name not in unrecorded]
        detail = f"the same {', '.join(seen)} as {ref}"
        detail += f" ({', '.join(unrecorded)}: not recorded)" if unrecorded else ""
        if changes:
            detail += f"; config keys differ, no observed quantity does: {describe_changes(changes)}"
        return Check("observed", True, detail)
    what = "; ".join(f"{name}: {d}" for name, d, _ in diffs)
    hints = "; ".join(hint for *_, hint in diffs)  # one per quantity: OBSERVED has no two alike
    if causes:
        return Check("observed", False, f"{run} vs {ref}: {describe_changes(causes)} changed {what}: {hints}")
    said = f"only cosmetic keys differ: {describe_changes(changes)}" if changes else "the same config"
    return Check("observed", False, f"{run} vs {ref}: {what} ({said}): {hints}")


def check_samples(single: Metrics, ddp: Metrics, ref: str = "single") -> Check:
    """Exact: every step's rows, summed over ranks, are the reference's (single device: the whole batch)."""
    s, d = single["samples"], ddp["samples"]
    bad = sorted({*EXACT.judge(d["count"], s["count"]).out, *EXACT.judge(d["hash_sum"], s["hash_sum"]).out})
    if not bad:
        return Check("samples", True, f"{len(s['count'])} steps consumed exactly the {ref} rows")
    i = bad[0]
    if d["count"][i] != s["count"][i]:
        why = f"the ranks consumed {d['count'][i]} rows, {ref} {s['count'][i]}: rows missing or duplicated"
    else:
        why = (
            f"{d['count'][i]} rows but other samples (hash sum {d['hash_sum'][i]} vs {s['hash_sum'][i]}): "
            "the ranks' shards overlap or miss rows"
        )
    where = (
        "your sampler: each rank must read its own part of the step's global batch, together all of it "
        "(DistributedSampler, or batch[rank::world]), and samples() its dataset indices"
        if own_trainer(single, ddp)
        else "xtrain/core/data.py shard_rows, step_batch"
    )
    return Check(
        "samples",
        False,
        f"samples differ at {len(bad)} of {len(s['count'])} steps, first step {i}: {why} ({where})",
    )


def dropout_mode(m: Metrics) -> str | None:
    """How a record's dropout masks were recorded: xtrain (our trainer seeds every mask per sample and
    fingerprints it), runrecord's seeded/off/none/given (metrics.json dropout.masks), given (an older
    runrecord record whose loop passed mask seeds), or None: not recorded."""
    if "dropout" in m:
        return m["dropout"]["masks"]
    if not foreign_recorder(m):
        return "xtrain"
    return "given" if any(m["samples"]["dropout_hash_sum"]) else None


def check_dropout(single: Metrics, ddp: Metrics, ref: str = "single") -> Check:
    """Exact: every step's dropout masks, summed over ranks, are the ones the reference drew; not
    applied where a record cannot say (runrecord did not see the model, or dropout was switched off)."""
    modes = {ref: dropout_mode(single), "the other": dropout_mode(ddp)}
    if None in modes.values():
        return Check(
            "dropout masks",
            True,
            "not recorded: runrecord did not see the model, so the masks drawn are unknown (RunRecorder("
            "..., model=model) seeds them per sample and records them)",
            applied=False,
        )
    if "unseeded" in modes.values():
        return Check(
            "dropout masks",
            False,
            "unseeded dropout (runrecord dropout='replicas'): no two runs draw the same masks, so the exact "
            "tier cannot judge them; the statistical tier does, from replicas of single (python -m gates explain "
            "loss_match_stat.proc)",
        )
    if "off" in modes.values():
        if set(modes.values()) != {"off"}:
            return Check(
                "dropout masks",
                False,
                f"the runs' dropout differs: {ref} {modes[ref]}, the other {modes['the other']} (runrecord "
                "dropout=): compare runs of one setting",
            )
        d = single["dropout"]
        return Check(
            "dropout masks",
            True,
            f"dropout switched off for these runs (runrecord dropout='off': {d['modules']} dropouts at p "
            f"{', '.join(f'{p:g}' for p in d['p']) or '-'} set to 0): no masks to compare",
            applied=False,
        )
    s, d = single["samples"]["dropout_hash_sum"], ddp["samples"]["dropout_hash_sum"]
    bad = list(EXACT.judge(d, s).out)
    if not bad:
        return Check("dropout masks", True, f"{len(s)} steps drew {_drawn(single, s, ref)}")
    i = bad[0]
    what = "none" if d[i] == 0 else "other masks"
    where = (
        "your samples() indices must be the batch rows' dataset indices, in row order, before the "
        "forward; or a rank trained with dropout off (eval mode)"
        if own_trainer(single, ddp)
        else "a rank's dropout seed or global row index is out of sync, or a rank trained with dropout "
        "off (xtrain/core/model.py Dropout, xtrain/core/train.py)"
    )
    return Check(
        "dropout masks",
        False,
        f"dropout differs at {len(bad)} of {len(s)} steps, first step {i}: the ranks drew {what} "
        f"(hash sum {d[i]} vs {s[i]}): {where}",
    )


def _drawn(single: Metrics, sums: list[int], ref: str) -> str:
    """What equal fingerprints say, true to what was recorded."""
    if any(sums):
        return f"the same masks as {ref}"
    if dropout_mode(single) == "none":
        return f"no masks, like {ref}: the model has no dropout with p > 0 (runrecord saw it)"
    if dropout_mode(single) == "seeded":
        return f"no masks, like {ref}, though the model has dropout: were both in eval mode?"
    return f"no masks (no dropout), like {ref}"


def check_first_step(single: Metrics, ddp: Metrics, tol: Approx, ref: str = "single") -> Check:
    """Tight: identical parameters at step 0, so only float summation order may differ."""
    pairs = {
        "loss[0]": (ddp["train_loss"][0], single["train_loss"][0]),
        "grad_norm[0]": (ddp["grad_norm"][0], single["grad_norm"][0]),
    }
    common = common_evals(ddp, single)
    if 0 in common:
        pairs["val_loss@0"] = common[0]
    rel = {k: rel_diffs([a], [b])[0] for k, (a, b) in pairs.items()}
    worst = max(rel, key=rel.__getitem__)
    detail = ", ".join(f"{k} rel {fmt(v)}" for k, v in rel.items())
    if tol.judge([a for a, _ in pairs.values()], [b for _, b in pairs.values()]).ok:
        return Check("first step", True, detail)
    a, b = pairs[worst]
    hint = WHOLE_MULTIPLE.get(worst, "") if b and _near_integer_ratio(a / b) else ""
    return Check(
        "first step",
        False,
        f"step 0 differs beyond summation order (rel <= {tol.rtol:g}): {worst} {a:.7g} vs {ref} {b:.7g}; "
        f"{detail}{hint}",
    )


# A step-0 value a whole multiple of the reference's: what each one says (else the verdict's Next names
# the side, told apart by what agrees: failure_case).
WHOLE_MULTIPLE = {
    "grad_norm[0]": ". a whole multiple: gradients summed instead of averaged? (summed over ranks, or the "
    "loss not divided by the accumulation steps before backward)",
    "loss[0]": ". a whole multiple: the loss must be divided by the accumulation steps before backward, "
    "and the logged loss is the mean over micro-batches and ranks (not their sum, not one rank's times "
    "the accumulation steps)",
}


def common_evals(run: Metrics, ref: Metrics) -> dict[int, tuple[float, float]]:
    """{step: (run's eval loss, ref's)} at every step both evaluated at, in run's (increasing) order."""
    ev_ref = {e["step"]: e["loss"] for e in ref["eval"]}
    return {e["step"]: (e["loss"], ev_ref[e["step"]]) for e in run["eval"] if e["step"] in ev_ref}


def _near_integer_ratio(r: float) -> bool:
    """Within 0.01 of a whole multiple >= 2: summed instead of averaged gradients give the world."""
    return math.isfinite(r) and round(r) >= 2 and math.isclose(r, round(r), rel_tol=0, abs_tol=0.01)


def check_prefix(
    single: Metrics, ddp: Metrics, k: int | None, tol: Approx, run: str, ref: str = "single"
) -> tuple[Check, float]:
    """The user's bound, over the steps before chaos: train losses and the evals inside them."""
    n = len(single["train_loss"]) if k is None else min(k, len(single["train_loss"]))
    train = tol.judge(ddp["train_loss"][:n], single["train_loss"][:n])
    ev = {s: pair for s, pair in common_evals(ddp, single).items() if s <= n}
    evals = tol.judge([x for x, _ in ev.values()], [y for _, y in ev.values()], list(ev))
    rel = rel_diffs(ddp["train_loss"][:n], single["train_loss"][:n])
    worst_step = max(range(n), key=rel.__getitem__)
    worst = max(train.max_rel, evals.max_rel)
    scope = f"{n} of {len(single['train_loss'])} steps and {evals.judged} evals"
    if train.ok and evals.ok:
        return Check("prefix", True, f"max rel {fmt(worst)} at step {worst_step} over {scope}"), worst
    if train.out:
        s = train.out[0]
        first = (
            f"first step over {tol.rtol:g}: step {s} ({ref} {single['train_loss'][s]:.7g}, "
            f"{run} {ddp['train_loss'][s]:.7g}, rel {fmt(rel[s])})"
        )
    else:
        s = evals.out[0]
        first = f"first eval over {tol.rtol:g}: step {s} (rel {fmt(rel_diffs([ev[s][0]], [ev[s][1]])[0])})"
    return Check("prefix", False, f"{first}; max rel {fmt(worst)} over {scope}"), worst


UNCHECKED_END = "the end of the run is unchecked"


def check_end(single: Metrics, ddp: Metrics, tol: Approx, ref: str = "single") -> Check:
    """The final val loss within its bound; where the runs' last evals are at other steps, the val loss
    at the last step both evaluated at; none in common: named, the end unchecked."""
    a, b = ddp["final_val_loss"], single["final_val_loss"]
    if a is None or b is None:
        return Check("end", False, f"no final validation loss{_no_evals(single, ddp)}: {UNCHECKED_END}")
    last = [m["eval"][-1]["step"] if m["eval"] else None for m in (single, ddp)]
    where = "final val"
    if last[0] != last[1]:
        common = common_evals(ddp, single)
        if not common:
            return Check(
                "end",
                False,
                f"no common eval step: {ref} evaluated at steps {_steps(single)}, the other at "
                f"{_steps(ddp)}: {UNCHECKED_END}",
            )
        step = max(common)
        a, b = common[step]
        where = f"val at step {step} (the last of {len(common)} eval steps both runs have)"
    diff = a - b if math.isfinite(a) and math.isfinite(b) else math.inf
    detail = f"{where} {a:.5f} vs {ref} {b:.5f} (diff {diff:+.2e}, tolerance {tol.atol:g})"
    return Check("end", tol.within(a, b), detail)


def _steps(m: Metrics) -> str:
    """A run's eval steps, the first and last few of a long list."""
    steps = [e["step"] for e in m["eval"]]
    if len(steps) <= 8:
        return str(steps)
    return f"[{', '.join(map(str, steps[:3]))}, ..., {', '.join(map(str, steps[-2:]))}] ({len(steps)} evals)"


def _no_evals(single: Metrics, ddp: Metrics) -> str:
    """Why a run has no final val loss, in its recorder's words."""
    if own_trainer(single, ddp):
        return " (no rec.eval() recorded)"
    return " (train.eval_every: 0)"


CASES = {
    "loss": (
        "the logged training loss differs while the gradient norms and the validation losses agree: a "
        "logging bug, not a training bug",
        "your loss logging: log the mean over ranks (all_reduce(loss) / world), not one rank's",
        "the loss reduction over ranks (xtrain/core/train.py)",
    ),
    "eval": (
        "training agrees (train losses and gradient norms) and only the validation loss differs",
        "your eval set: every rank evaluates the same rows (or its shard of a set that divides by the "
        "world), averaged by count; a padded eval set repeats rows",
        "the evaluation (xtrain/core/train.py evaluate)",
    ),
    "losses": (
        "the train and validation losses differ while the gradient norms agree",
        "your loss logging and your eval set (a late divergence of training shows this way too)",
        "the loss reduction and the evaluation (xtrain/core/train.py)",
    ),
    "gradient": (
        "the gradients differ",
        "your gradient all-reduce (the mean over ranks), your init (the same weights on every rank), "
        "your lr schedule (stepped once per step on every rank) or your dropout (RunRecorder(model=...) "
        "seeds it per sample)",
        "the gradient reduction or sharding (xtrain/core/comm.py, xtrain/core/data.py)",
    ),
}


def failure_case(single: Metrics, ddp: Metrics, tier: Tier) -> str:
    """Which side a failure of the numbers points at, told apart by what agrees (step 0 within the
    first-step bound, the prefix within max_rel, the end within its atol): loss only (logging), eval
    only (the eval set), or the gradients (training itself)."""
    steps = len(single["train_loss"])
    n = steps if tier.prefix_steps is None else min(tier.prefix_steps, steps)

    def agree(key: str) -> bool:
        got, ref = ddp[key][:n], single[key][:n]
        return tier.first_step.within(got[0], ref[0]) and tier.prefix.judge(got, ref).ok

    ev = common_evals(ddp, single)
    evals = (
        (0 not in ev or tier.first_step.within(*ev[0]))
        and tier.prefix.judge([a for a, _ in ev.values()], [b for _, b in ev.values()]).ok
        and check_end(single, ddp, tier.end).ok
    )
    train, grads = agree("train_loss"), agree("grad_norm")
    case = "gradient" if not grads else "loss" if evals else "eval" if train else "losses"
    what, yours, ours = CASES[case]
    if case == "gradient":
        out = [i for i in range(n) if not tier.prefix.within(ddp["grad_norm"][i], single["grad_norm"][i])]
        what += f" (grad_norm first out at step {out[0] if out else 0})"
    return f"{what}: {yours if own_trainer(single, ddp) else ours}"


def equivalence(
    single: Metrics, ddp: Metrics, run: str, loss_match: dict[str, Any], ref: str = "single"
) -> Outcome:
    """The loss_match verdict for runs/<run> against runs/<ref> (single device, or thread for parity)."""
    max_rel = loss_match["max_rel"]
    problem = shape_problem(single, ddp, run, ref)
    if problem:
        return failed(None, max_rel, problem)
    tier = tier_for(loss_match, ddp["device"])
    if tier is None:
        return failed(
            None,
            max_rel,
            f"params.yaml gates.loss_match.{ddp['device']}: missing: no tolerance tier for runs on {ddp['device']}",
        )
    prefix, worst = check_prefix(single, ddp, tier.prefix_steps, tier.prefix, run, ref)
    checks = [
        check_samples(single, ddp, ref),
        check_dropout(single, ddp, ref),
        check_first_step(single, ddp, tier.first_step, ref),
        prefix,
        check_end(single, ddp, tier.end, ref),
        check_observed(single, ddp, run, ref, tuple(loss_match.get("cosmetic_keys", ()))),
    ]
    threshold = tier.describe(len(single["train_loss"]))
    world = f"world {ddp['world']} vs {single['world']}"
    skipped = {c.name: c.detail for c in checks if not c.applied}
    if all(c.ok for c in checks):
        shown = "; ".join(f"{c.name}: not applied: {c.detail}" if not c.applied else c.detail for c in checks)
        return Outcome("pass", worst, threshold, f"{world}: {shown}", not_applied=skipped)
    bad = [c for c in checks if not c.ok]
    return Outcome(
        "fail",
        worst,
        threshold,
        f"{world}: "
        + "; ".join(f"{c.name}: {c.detail}" for c in bad)
        + f". Next: {next_step(single, ddp, bad, tier, run, ref)}",
        not_applied=skipped,
    )


def next_step(single: Metrics, ddp: Metrics, bad: list[Check], tier: Tier, run: str, ref: str) -> str:
    """What to do after the failed checks `bad`: our design note for our own trainer's runs; for a
    loop of its own, `python -m gates explain` and the user's own run files (no docs/ there)."""
    files = f"compare runs/{ref}/loss.csv with runs/{run}/loss.csv"
    gate = "launcher_parity" if ref == "thread" else f"loss_match.{run}"
    yours = own_trainer(single, ddp)
    names = [c.name for c in bad]
    if names == ["end"] and bad[0].detail.endswith(UNCHECKED_END):
        return (
            f"evaluate both runs after one optimizer step (the last, say), then rerun them; see runs/{ref}/"
            f"eval.csv and runs/{run}/eval.csv"
            if yours
            else "set train.eval_every > 0 and rerun both"
        )
    if names == ["end"]:
        if yours:
            return (
                "a late divergence only (the exact checks passed): rerun with another seed; a real bug, or "
                f"gates.loss_match.{ddp['device']}.final_val_atol too tight for your runs (python -m gates "
                f"explain {gate})"
            )
        return (
            "a late divergence only (exact checks passed): rerun with other seeds; a real bug or a tier "
            "too tight for this profile (docs/ddp-gate.md)"
        )
    if {"samples", "dropout masks", "observed"} & set(names):
        return f"{f'python -m gates explain {gate}' if yours else 'see docs/ddp-gate.md'}; {files}"
    return f"{failure_case(single, ddp, tier)}; {files}"


def describe_tiers(loss_match: dict[str, Any]) -> str:
    """The thresholds of every configured tier, for `python -m gates list`."""
    parts = []
    for device in ("cpu", "cuda"):
        t = tier_for(loss_match, device)
        if t is not None:
            k = "every step" if t.prefix_steps is None else f"{t.prefix_steps} steps"
            parts.append(
                f"{device}: step 0 rel <= {t.first_step.rtol:g}, max rel <= {t.prefix.rtol:g} over {k}, "
                f"final val +- {t.end.atol:g}"
            )
    return "samples and dropout masks exact; " + "; ".join(parts or ["no tier configured"])


def loss_match(r: Runs, loss_match: dict[str, Any]) -> Outcome:
    """runs/<launcher> against runs/single (the records' two runs, single first)."""
    single, ddp = r.runs
    refused = refuse_runs(r, loss_match["max_rel"])  # not what params.yaml (or its own record) says
    if refused:
        return refused
    return with_train_mode(equivalence(single.metrics, ddp.metrics, ddp.name, loss_match), pairs(r))


def launcher_parity(r: Runs, loss_match: dict[str, Any], max_rel: float) -> Outcome:
    """torchrun (proc) against thread-per-rank at the same world, judged like loss_match.

    Two launchers at world > 2 may reduce in different orders (NCCL picks rings or trees per
    communicator): a one-ulp difference that chaos amplifies over a whole run. So parity is judged
    with the DDP gate's design and the device's tier; only the prefix bound is launcher_parity's own.
    """
    thread, proc = r["thread"].metrics, r["proc"].metrics
    refused = refuse_runs(r, max_rel)
    if refused:
        return refused
    o = equivalence(thread, proc, "proc", {**loss_match, "max_rel": max_rel}, ref="thread")
    return with_train_mode(o, pairs(r))


# ---- the picture: what the gate judged, against its bound ------------------------------------------


def loss_match_picture(r: Runs, t: Thresholds) -> Picture:
    from gates.judges import plots
    from gates.judges.pictures import metrics_pair, rel_panel

    launcher = r.runs[1].name
    got, ref = metrics_pair(r, launcher, "single")
    # The gate bounds max rel only over its tier's prefix (later steps are chaotic): draw that.
    tier = tier_for(t["loss_match"], got["device"])
    prefix = tier.prefix_steps if tier is not None else None
    max_rel = t["loss_match"]["max_rel"]
    fig, (ax,) = plots.figure()
    first = rel_panel(ax, got, ref, launcher, "single", max_rel, prefix)
    span = "every step" if prefix is None else f"the first {prefix} steps"
    ax.set_title(f"{launcher} (world {got['world']}) vs single device: relative loss difference, {span}")
    where = f" First step over the line: {first}." if first is not None else ""
    return Picture(
        plots.to_svg(fig),
        f"Relative difference of the training loss (dots) and eval loss (squares) per step over {span} "
        f"(the gate's prefix), log scale, dimensionless; exact agreement is drawn at {plots.ZERO_FLOOR:g}. "
        f"Pass: every point below the dashed line (max rel {max_rel:g}); the gate also checks the samples, "
        f"step 0 and the final val loss (its message).{where}",
    )


def launcher_parity_picture(r: Runs, t: Thresholds) -> Picture:
    from gates.judges import plots
    from gates.judges.pictures import metrics_pair, rel_panel

    max_rel = t["launcher_parity"]["max_rel"]
    got, ref = metrics_pair(r, "proc", "thread")
    # Judged like loss_match: the bound holds over the device tier's prefix; later steps are drawn, not judged.
    tier = tier_for(t["loss_match"], got["device"])
    prefix = tier.prefix_steps if tier is not None else None
    steps = list(range(len(got["train_loss"])))
    judged = len(steps) if prefix is None else min(prefix, len(steps))
    bound = Approx.relative(max_rel)  # the prefix bound of the tier launcher_parity judges with
    marked = list(bound.judge(got["train_loss"][:judged], ref["train_loss"][:judged]).out)
    fig, (top, bottom) = plots.figure(2)
    plots.overlay(top, steps, ref["train_loss"], got["train_loss"], ("thread", "proc (torchrun)"), marked)
    top.set_ylabel("train loss (nats/token)")
    top.set_title(f"torchrun (proc) vs thread-per-rank training loss, world {got['world']}")
    first = rel_panel(bottom, got, ref, "proc", "thread", max_rel, prefix)
    span = "every step" if prefix is None else f"the first {prefix} steps (the tier's prefix)"
    where = f" First step over: {first}." if first is not None else ""
    return Picture(
        plots.to_svg(fig),
        f"Top: both trajectories (loss in nats per token), judged steps over the limit marked ×. Bottom: "
        f"their relative difference over {span} (log scale; 0 drawn at {plots.ZERO_FLOOR:g}). Pass: every "
        f"point below the dashed line (max rel {max_rel:g}); the gate also checks samples, dropout masks, "
        f"step 0 and the final val loss exactly as loss_match does (its message).{where}",
    )


# ---- the gates -------------------------------------------------------------------------------------


def loss_match_gate(launcher: str) -> Gate:
    return Gate(
        id=f"loss_match.{launcher}",
        checks=f"the {launcher}-per-rank DDP run against single-device training of the same config: the "
        "samples and dropout masks of every step (exact), step 0 (summation order), the loss over a prefix, "
        "the validation loss at the steps both runs evaluated at; both runs trained every step in train "
        "mode (metrics.json eval_mode_steps empty)",
        threshold=lambda t: describe_tiers(t["loss_match"]),
        judge=lambda r, t: loss_match(r, t["loss_match"]),
        why="data parallelism must not change the math: averaged shard gradients equal the full-batch gradient "
        "up to float summation order; past a few dozen steps on the GPU profile that order is amplified "
        "chaotically, so only exact and early checks are tight",
        investigate=f"the message names the failing check. samples: the sharding (each rank reads its own part "
        f"of the step's global batch, together all of it). first step: the gradient reduction (a mean over "
        f"ranks), the sharding, the init or dropout; a grad_norm[0] ratio of world means a sum, not a mean; a "
        f"loss a whole multiple of single's: the loss must be divided by the accumulation steps before "
        f"backward. prefix: the first step over the bound; end only: rerun with other seeds. Files: "
        f"runs/single/loss.csv, runs/{launcher}/loss.csv, eval.csv beside them",
        takes=("loss_match",),
        picture=loss_match_picture,
        read=lambda a, t: read_loss_match(a, launcher),
    )


LAUNCHER_PARITY = Gate(
    id="launcher_parity",
    checks="the process-per-rank (torchrun) trajectory against the thread-per-rank one; both trained "
    "every step in train mode (metrics.json eval_mode_steps empty)",
    threshold=lambda t: (
        "as loss_match, thread as the reference: "
        + describe_tiers({**t["loss_match"], "max_rel": t["launcher_parity"]["max_rel"]})
    ),
    judge=lambda r, t: launcher_parity(r, t["loss_match"], t["launcher_parity"]["max_rel"]),
    why="the two launchers must differ only in how ranks start and how gradients travel (measured: "
    "1.5e-7); at world 4 on H200s their reductions sum in other orders, so a whole-run bound is unsound",
    investigate="same world and config? (metrics.json world, config_hash). On CPU they are bit-identical: "
    "a samples or step-0 failure means the gradient path changed (DDP bucket order, reduction, sharding)",
    takes=("loss_match", "launcher_parity"),
    picture=launcher_parity_picture,
    read=lambda a, t: read_launcher_parity(a),
)
