"""Export gates: pinned re-export vs the registry, fresh training vs its golden (closed loop: gates/closed_loop.py)."""

from __future__ import annotations

from typing import Any

from gates.artifacts import Artifacts
from gates.outcome import Outcome, failed, fmt, passed, rel_diffs
from gates.training import run_metrics
from registry.store import Entry, Registry, RegistryError, compare_files

MANIFEST = "manifest.json"


def _manifest(a: Artifacts, name: str) -> dict[str, Any]:
    return a.json(f"exports/{name}/{MANIFEST}", "manifest.schema.json", "export")


def _registry(a: Artifacts) -> Registry:
    return Registry(a.root / "registry")


def _record(a: Artifacts, entry: Entry) -> None:
    a.record(str(entry.path.relative_to(a.root)), entry.path)


def blessed_version(reg: Registry, source_md5: str, dtype: str) -> Entry | None:
    """The latest blessed version of whichever model was exported from this checkpoint."""
    found = [
        e
        for m in reg.models()
        for e in reg.versions(m)
        if e.data["source_checkpoint_md5"] == source_md5 and e.data["dtype"] == dtype
    ]
    return max(found, key=lambda e: e.version) if found else None


def export_md5(a: Artifacts) -> Outcome:
    manifest = _manifest(a, "pinned")
    actual = a.folder("exports/pinned", "export", exclude=(MANIFEST,))
    reg = _registry(a)
    entry = blessed_version(reg, manifest["source_checkpoint"]["model_md5"], manifest["dtype"])
    if entry is None:
        return failed(
            None,
            "equal",
            f"no registry version blessed for checkpoint "
            f"{manifest['source_checkpoint']['model_md5']} in {manifest['dtype']}: "
            f"python -m registry bless --reason '...'",
        )
    _record(a, entry)
    checks = compare_files(entry.data["files"], actual)
    bad = [c for c in checks if not c.ok]
    measured = f"{len(checks) - len(bad)}/{len(checks)} files equal"
    where = f"{entry.data['model']} v{entry.version} ({entry.data['dtype']})"
    if not bad:
        return passed(measured, "equal", f"re-export of the pinned checkpoint reproduces {where}")
    diffs = "; ".join(
        f"{c.name}: expected {c.expected or '(absent)'}, got {c.actual or '(absent)'}" for c in bad
    )
    return failed(
        measured,
        "equal",
        f"exports/pinned differs from {where}: {diffs}. The exporter's output "
        f"changed. Next: python -m registry verify exports/pinned; if the change is intended, "
        f"python -m registry bless --reason '...'",
    )


def fresh_train(a: Artifacts, loss_rtol: float, max_steps_out: int, unblessed: str) -> Outcome:
    m = run_metrics(a, "single")
    _manifest(a, "fresh")
    files = a.folder("exports/fresh", "export", exclude=(MANIFEST,))
    env_id = m["env"]["env_id"]
    try:
        golden = _registry(a).golden(env_id)
    except RegistryError as e:
        return Outcome("error", None, None, str(e))
    if golden is None:
        status = "fail" if unblessed == "fail" else "skip"
        return Outcome(
            status,
            "unblessed",
            None,
            f"unblessed: no golden for environment {env_id}. If this run is "
            f"right, bless it: python -m registry bless --golden --reason '...'",
        )
    _record(a, golden)
    g = golden.data
    if g["config_hash"] != m["config_hash"]:
        return failed(
            None,
            g["tier"],
            f"golden {env_id} v{golden.version} was blessed for config {g['config_hash']}, "
            f"this run is {m['config_hash']}: an intended config change needs a new golden "
            f"(python -m registry bless --golden --reason '...')",
        )
    ref = g["metrics"]["train_loss"]["values"]
    steps = sorted(int(s) for s in ref)
    if steps[-1] >= len(m["train_loss"]):
        return failed(None, g["tier"], f"run has {len(m['train_loss'])} steps, golden has {steps[-1] + 1}")
    got = [m["train_loss"][s] for s in steps]
    want = [ref[str(s)] for s in steps]
    rel = rel_diffs(got, want)
    md5_bad = [c for c in compare_files(g["export"]["files"], files) if not c.ok]
    if g["tier"] == "exact":
        diff = [s for s, x, y in zip(steps, got, want, strict=True) if x != y]
        val_ref = g["metrics"].get("val_loss", {}).get("values", {})
        val_diff = [
            e["step"] for e in m["eval"] if str(e["step"]) in val_ref and e["loss"] != val_ref[str(e["step"])]
        ]
        if not diff and not val_diff and not md5_bad:
            return passed(
                "bitwise",
                "exact",
                f"{len(steps)} losses and {len(files)} export files bit-identical to "
                f"golden {env_id} v{golden.version}",
            )
        parts = []
        if diff:
            s = diff[0]
            parts.append(
                f"first differing step {s} (golden {ref[str(s)]!r}, run {m['train_loss'][s]!r}), "
                f"{len(diff)} steps differ, max rel {fmt(max(rel))}"
            )
        if val_diff:
            parts.append(f"val loss differs at steps {val_diff}")
        if md5_bad:
            parts.append("export files differ: " + ", ".join(c.name for c in md5_bad))
        return failed(
            f"{len(diff)} steps, {len(md5_bad)} files differ",
            "exact",
            "; ".join(parts) + ". This environment trained "
            "bit-identically before: find the change that moved the numbers (git bisect with "
            "`dvc repro train_single`), or if intended bless a new golden with a reason",
        )
    out = [s for s, r in zip(steps, rel, strict=True) if not r <= loss_rtol]
    threshold = f"rtol {loss_rtol:g}, <= {max_steps_out} steps out"
    md5_note = "export md5 equal" if not md5_bad else "export md5 differs (expected on this tier)"
    if len(out) <= max_steps_out:
        return passed(
            f"{len(out)} steps out",
            threshold,
            f"max rel {fmt(max(rel))} vs golden {env_id} v{golden.version} (approximate tier); {md5_note}",
        )
    return failed(
        f"{len(out)} steps out",
        threshold,
        f"{len(out)} steps beyond rtol {loss_rtol:g} (first: step "
        f"{out[0]}, rel {fmt(rel[steps.index(out[0])])}); max rel {fmt(max(rel))}. Next: compare "
        f"runs/single/loss.csv with the golden's values",
    )
