"""fresh_train: this run's single-device trajectory and export against a golden (gates/goldens.py).

Exact tier: every train loss, val loss and export md5 bit-identical. Approximate tier (another
environment's golden, or a golden blessed approximate): train losses within loss_rtol with at most
max_steps_out steps outside, every val loss within eval_rtol; export md5s are only noted.
Tolerances per device type: gates.fresh_train.approx.<cpu|cuda>, as the Exact and Approx classes of
gates/tolerance.py (ApproxTier says which key is which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.numbers import rel_diff
from gates import goldens
from gates.artifacts import ArtifactError, Artifacts
from gates.export_md5 import MANIFEST, export_problems
from gates.outcome import Outcome, failed, fmt, passed, rel_diffs
from gates.tolerance import Approx, Exact, Verdict
from gates.training import refuse, run_metrics
from registry.store import Registry, RegistryError, compare_files

EXACT = Exact()


def fresh_train(a: Artifacts, policy: dict[str, Any]) -> Outcome:
    m = run_metrics(a, "single")
    refused = refuse(a, [("single", m)], None)
    if refused:
        return refused
    manifest = a.json(f"exports/fresh/{MANIFEST}", "manifest.schema.json", "export")
    files = a.folder("exports/fresh", "export", exclude=(MANIFEST,))
    edited = export_problems("exports/fresh", manifest, files)
    if edited:
        raise ArtifactError("; ".join(edited) + " (re-export with dvc repro export)")
    env_id = m["env"]["env_id"]
    reg = Registry(a.root / "registry")
    try:
        choice = goldens.choose(reg, env_id, m["config_hash"], m["device"], m["precision"])
    except RegistryError as e:
        return Outcome("error", None, None, str(e))
    if choice is None:
        return _no_golden(reg, env_id, m["config_hash"], policy["unblessed"])
    a.record(str(choice.entry.path.relative_to(a.root)), choice.entry.path)
    g = choice.entry.data
    problems = goldens.coverage_problems(g, a.params["train"])
    if problems:
        return failed(None, choice.tier, "; ".join(problems) + ": refusing to judge against it")
    if choice.tier == "exact":
        return _exact(m, g, files, choice)
    return _approx(m, g, files, choice, policy["approx"][m["device"]])


def _no_golden(reg: Registry, env_id: str, config_hash: str, unblessed: str) -> Outcome:
    own = reg.golden(env_id)
    if own is not None:
        return failed(
            None,
            own.data["tier"],
            f"golden {env_id} v{own.version} was blessed for config {own.data['config_hash']}, this run "
            f"is {config_hash}, and no other environment has a golden for it: an intended config change "
            f"needs a new golden (python -m registry bless --golden --reason '...')",
        )
    return Outcome(
        "fail" if unblessed == "fail" else "skip",
        "unblessed",
        None,
        f"unblessed: no golden for environment {env_id} nor for config {config_hash} on any other. "
        f"If this run is right, bless it: python -m registry bless --golden --reason '...'",
    )


def _pairs(m: dict[str, Any], g: dict[str, Any]) -> tuple[list[float], list[float], list[int]]:
    steps = list(range(len(m["train_loss"])))
    want = [g["metrics"]["train_loss"]["values"][str(s)] for s in steps]
    return m["train_loss"], want, steps


def _val_pairs(m: dict[str, Any], g: dict[str, Any]) -> list[tuple[int, float, float]]:
    ref = g["metrics"]["val_loss"]["values"]
    return [(e["step"], e["loss"], ref[str(e["step"])]) for e in m["eval"]]


def _exact(m: dict[str, Any], g: dict[str, Any], files: dict[str, str], choice: goldens.Choice) -> Outcome:
    got, want, steps = _pairs(m, g)
    diff = list(EXACT.judge(got, want, steps).out)
    vals = _val_pairs(m, g)
    val_diff = list(
        EXACT.judge([x for _, x, _ in vals], [y for _, _, y in vals], [s for s, _, _ in vals]).out
    )
    md5_bad = [c.name for c in compare_files(g["export"]["files"], files) if not c.ok]
    if not diff and not val_diff and not md5_bad:
        return passed(
            "bitwise",
            "exact",
            f"exact tier vs golden {choice.name}: {len(steps)} losses, {len(m['eval'])} val losses and "
            f"{len(files)} export files bit-identical",
        )
    parts = []
    if diff:
        s = diff[0]
        parts.append(
            f"first differing step {s} (golden {want[s]!r}, run {got[s]!r}), {len(diff)} steps differ, "
            f"max rel {fmt(max(rel_diffs(got, want)))}"
        )
    if val_diff:
        parts.append(f"val loss differs at steps {val_diff}")
    if md5_bad:
        parts.append("export files differ: " + ", ".join(md5_bad))
    return failed(
        f"{len(diff)} steps, {len(md5_bad)} files differ",
        "exact",
        f"exact tier vs golden {choice.name}: " + "; ".join(parts) + ". This environment trained "
        "bit-identically before: find the change that moved the numbers (git bisect with "
        "`dvc repro train_single`), or if intended bless a new golden with a reason",
    )


@dataclass(frozen=True)
class ApproxTier:
    """params.yaml gates.fresh_train.approx.<device> as tolerances (gates/tolerance.py)."""

    loss: Approx  # Approx.relative(loss_rtol, max_out=max_steps_out): the judged train losses
    prefix_steps: int | None  # judge only the first N train losses (cuda); None: every one
    val: Approx  # Approx.relative(eval_rtol): every val loss; with prefix_steps, the step-0 one only
    final_val: Approx | None  # Approx.absolute(final_val_atol), with prefix_steps: the last val loss

    @classmethod
    def of(cls, tol: dict[str, Any]) -> ApproxTier:
        final = tol.get("final_val_atol")
        return cls(
            loss=Approx.relative(tol["loss_rtol"], max_out=tol["max_steps_out"]),
            prefix_steps=tol.get("prefix_steps"),
            val=Approx.relative(tol["eval_rtol"]),
            final_val=None if final is None else Approx.absolute(final),
        )

    def describe(self) -> str:
        loss, val = self.loss, self.val
        if self.prefix_steps is not None and self.final_val is not None:
            return (
                f"rtol {loss.rtol:g} over the first {self.prefix_steps} steps, <= {loss.max_out} out, "
                f"val@0 rtol {val.rtol:g}, |final val diff| <= {self.final_val.atol:g}"
            )
        return f"rtol {loss.rtol:g}, <= {loss.max_out} steps out, eval rtol {val.rtol:g}"


def approx_threshold(tol: dict[str, Any]) -> str:
    """The approximate tier of params.yaml gates.fresh_train.approx.<device>, as people read it."""
    return ApproxTier.of(tol).describe()


def _approx_outs(
    got: list[float], want: list[float], vals: list[tuple[int, float, float]], tier: ApproxTier
) -> tuple[Verdict, list[tuple[int, float]]]:
    """The judged train losses' verdict (steps out, max rel) and the val losses out of their bound.

    With prefix_steps (the cuda tier), only the first prefix_steps train losses are judged, the step-0
    val loss within eval_rtol and the final val loss within final_val_atol: other GPU kernels reorder
    sums, and in bf16 equivalent reorderings part chaotically after ~20 steps (docs/verdicts.md),
    so a whole-trajectory rtol loose enough for them (Megatron's 0.05) also passes an lr change."""
    k = len(got) if tier.prefix_steps is None else tier.prefix_steps
    loss = tier.loss.judge(got[:k], want[:k])
    judged = vals if tier.prefix_steps is None else [v for v in vals[:1] if v[0] == 0]
    val_out = [(s, rel_diff(x, y)) for s, x, y in judged if not tier.val.within(x, y)]
    if tier.final_val is not None and vals and not tier.final_val.within(vals[-1][1], vals[-1][2]):
        val_out.append((vals[-1][0], abs(vals[-1][1] - vals[-1][2])))  # NaN is out too
    return loss, val_out


def _approx(
    m: dict[str, Any], g: dict[str, Any], files: dict[str, str], choice: goldens.Choice, tol: dict[str, Any]
) -> Outcome:
    got, want, _ = _pairs(m, g)
    loss, val_out = _approx_outs(got, want, _val_pairs(m, g), ApproxTier.of(tol))
    out, max_rel = list(loss.out), loss.max_rel
    threshold = f"approx vs {choice.name}: {approx_threshold(tol)}"
    md5_same = all(c.ok for c in compare_files(g["export"]["files"], files))
    where = "another environment's golden" if choice.cross_env else "a golden blessed approximate"
    summary = (
        f"approximate tier vs golden {choice.name} ({where}): max rel {fmt(max_rel)}, "
        f"{len(out)} steps out, {len(val_out)} val losses out ({approx_threshold(tol)}); "
        f"export md5 {'equal' if md5_same else 'differs (not judged in this tier)'}"
    )
    if loss.ok and not val_out:
        return passed(f"{len(out)} steps out", threshold, summary)
    first = f"first step out: {out[0]} (golden {want[out[0]]!r}, run {got[out[0]]!r})" if out else ""
    val = f"val loss out at steps {[s for s, _ in val_out]}" if val_out else ""
    return failed(
        f"{len(out)} steps out",
        threshold,
        f"{summary}; {'; '.join(x for x in (first, val) if x)}. A real change of the numbers (lr, init, "
        f"data order), not machine noise: compare runs/single/loss.csv with the golden's values",
    )
