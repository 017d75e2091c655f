"""python -m registry: list, verify, bless, pin, validate.

    python -m registry list
    python -m registry verify exports/pinned              # each file's expected and actual md5; exit 1 on mismatch
    python -m registry bless --reason "why"               # bless exports/pinned as the next version
    python -m registry bless --golden --reason "why"      # bless this environment's golden from the fresh run
                                                          # (no exports/fresh: the run alone, into ./registry)
    python -m registry bless --perf --reason "why"        # bless this environment's perf baseline from runs/
    python -m registry pin runs/single --model NAME --reason "why"   # pin a new reference checkpoint
    python -m registry validate                           # schema-check every registry file, and the index
    python -m registry index                              # write registry/index.json where there is none

Blessing never rewrites: it adds the next version and shows the diff from the last one. A reason
(at least 10 characters) is required: goldens are never refreshed just to make a failure pass.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

from contracts import artifact_table, lockfile, outputs
from contracts.checkpoint_dir import resolve_checkpoint
from contracts.errors import cli, shown
from contracts.fileio import atomic_write_json, md5_file
from contracts.numbers import max_rel
from contracts.validate import load_schema, validate
from params.cli import add_params_args
from registry import index
from registry.baselines import bless_baseline
from registry.checks import (
    PINNED_FILES,
    check_against_manifest,
    check_checkpoint,
    check_finite,
    check_name,
    inside,
    validate_everything,
)
from registry.provenance import provenance
from registry.sealed import seal
from registry.store import (
    MANIFEST,
    ROOT,
    Registry,
    RegistryError,
    check_export,
    compare_files,
    export_files,
    write_once,
)

MIN_REASON = 10
CHECK_REPORT = outputs.json_kind("registry check", artifact_table.artifact("registry_check").format)
REGISTRY_PARTS = ("index.json", "models", "pinned", "goldens", "baselines")


def check_root(reg: Registry) -> None:
    """A command that writes into --root: it must be a registry (its index or one of its folders) or a new
    one (absent, empty), never a folder that happens to be named (`registry index` wrote into any)."""
    root = reg.root
    if not root.exists() and not root.is_symlink():
        return
    fresh = root.is_dir() and not any(root.iterdir())
    if (
        root.is_symlink()
        or not root.is_dir()
        or not (fresh or any((root / p).exists() for p in REGISTRY_PARTS))
    ):
        raise RegistryError(
            f"{root}: not a registry (none of {', '.join(REGISTRY_PARTS)} there); "
            "next: name the registry folder with --root (default: the registry package)"
        )


def default_model(params: str) -> str:
    from params.config import load_params

    return check_name(load_params(params)["export"]["pinned_model"], params, "export.pinned_model")


def read_manifest(export_dir: Path) -> dict[str, Any]:
    return artifact_table.read("manifest", export_dir / MANIFEST)


def need_reason(reason: str | None) -> str:
    if not reason or len(reason.strip()) < MIN_REASON:
        raise RegistryError(
            f"bless needs --reason with at least {MIN_REASON} characters saying why "
            "(never bless only to make an unexplained failure pass)"
        )
    return reason.strip()


# -- verify -------------------------------------------------------------------------------------------


def verify(reg: Registry, export_dir: Path, model: str, number: int | None) -> dict[str, Any]:
    check_name(model, "--model", "model")
    manifest = read_manifest(export_dir)
    result = check_export(reg, model, manifest, export_files(export_dir), number)
    return {
        "format": "xtrain-registry-check/1",
        "model": model,
        "version": result.entry.version,
        "dtype": manifest["dtype"],
        "passed": result.passed,
        "files": [
            {"name": c.name, "expected": c.expected, "actual": c.actual, "ok": c.ok} for c in result.files
        ],
        "source_checkpoint": {
            "expected": result.source.expected,
            "actual": result.source.actual,
            "ok": result.source.ok,
        },
    }


def print_verify(report: dict[str, Any], export_dir: Path) -> None:
    print(
        f"{shown(export_dir)} vs registry {report['model']} v{report['version']} ({shown(report['dtype'])}):"
    )
    print(f"  {'file':<24} {'expected md5':<34} {'actual md5':<34} ok")
    for f in report["files"]:  # an export folder's file names are anyone's: escaped
        print(
            f"  {shown(f['name']):<24} {shown(f['expected'] or '-'):<34} {f['actual'] or '-':<34} "
            f"{'yes' if f['ok'] else 'NO'}"
        )
    s = report["source_checkpoint"]
    print(f"  {'(source checkpoint)':<24} {s['expected']:<34} {s['actual']:<34} {'yes' if s['ok'] else 'NO'}")
    print("PASS" if report["passed"] else "FAIL: the export differs from the blessed version")


# -- bless --------------------------------------------------------------------------------------------


def bless_version(reg: Registry, export_dir: Path, model: str, reason: str, params: str) -> int:
    check_name(model, "--model", "model")
    manifest = read_manifest(export_dir)
    files = check_against_manifest(
        export_dir, manifest
    )  # a hand edit since export is refused, naming the file
    pin = reg.pin(model)
    if manifest["source_checkpoint"]["model_md5"] != pin["model_md5"]:
        raise RegistryError(
            f"{export_dir} was exported from checkpoint md5 {manifest['source_checkpoint']['model_md5']}, "
            f"not from {model}'s pinned checkpoint ({pin['model_md5']})"
        )
    folder = reg.root / "models" / model
    previous = [e for e in reg.versions(model) if e.data["dtype"] == manifest["dtype"]]
    if previous:
        last = previous[-1]
        changed = [c for c in compare_files(last.data["files"], files) if not c.ok]
        if not changed:
            print(
                f"{export_dir} is identical to {model} v{last.version} ({manifest['dtype']}): nothing to bless"
            )
            return 0
        print(f"diff from {model} v{last.version}:")
        for c in changed:
            print(f"  {shown(c.name)}: {shown(c.expected or '(absent)')} -> {c.actual or '(absent)'}")
    path = reg.next_path(folder)
    entry = {
        "format": "xtrain-registry-version/1",
        "model": model,
        "version": int(path.stem[1:]),
        "dtype": manifest["dtype"],
        "exporter": manifest["exporter"],
        "files": files,
        "source_checkpoint_md5": pin["model_md5"],
        "provenance": provenance(params_path=params),
        "reason": reason,
    }
    entry = seal(entry)
    validate(entry, load_schema("version.schema.json"), str(path))
    write_once(inside(reg.root, path), entry)
    reg.record(path)
    print(f"blessed {path}")
    return 0


def series(values: dict[int, float]) -> dict[str, Any]:
    steps = sorted(values)
    interval = min((b - a for a, b in itertools.pairwise(steps)), default=1)  # distinct steps: >= 1
    return {
        "start_step": steps[0],
        "end_step": steps[-1],
        "step_interval": interval,
        "values": {str(s): values[s] for s in steps},
    }


def bless_golden(
    reg: Registry, metrics_path: Path, export_dir: Path | None, tier: str | None, reason: str, params: str
) -> int:
    """A golden from a run record: its trajectory, its parameter digest and (`export_dir`) the export
    md5s. A project of its own (runrecord) has no export: its golden is the run alone."""
    metrics = check_finite(artifact_table.read("metrics", metrics_path), str(metrics_path))
    env = metrics["env"]
    env_id = check_name(env.get("env_id"), str(metrics_path), "env.env_id")
    export = None
    if export_dir is not None:
        manifest = read_manifest(export_dir)
        export = {"dtype": manifest["dtype"], "files": check_against_manifest(export_dir, manifest)}
    tier = tier or ("exact" if metrics["device"] == "cpu" else "approx")
    golden = {
        "format": "xtrain-golden/1",
        "env_id": env_id,
        "version": 0,  # pragma: no mutate -- equivalent: a placeholder, set from the file name below
        "tier": tier,
        "config_hash": metrics["config_hash"],
        "metrics": {
            "train_loss": series(dict(enumerate(metrics["train_loss"]))),
            "val_loss": series({e["step"]: e["loss"] for e in metrics["eval"]}),
            "grad_norm": series(dict(enumerate(metrics["grad_norm"]))),
        },
        **({"export": export} if export is not None else {}),
        "run": {"param_digest": metrics["param_digest"]},
        "provenance": provenance(env, params),
        "reason": reason,
    }
    last = reg.golden(env_id)
    if last is not None and _same_golden(last.data, golden, env_id):
        return 0
    path = reg.next_path(reg.root / "goldens" / env_id)
    golden["version"] = int(path.stem[1:])
    golden = seal(golden)
    validate(golden, load_schema("golden.schema.json"), str(path))
    write_once(inside(reg.root, path), golden)
    reg.record(path)
    what = "" if export is not None else ", the run alone: no export"
    print(f"blessed golden {path} ({tier} tier{what})")
    return 0


def _same_golden(last: dict[str, Any], golden: dict[str, Any], env_id: str) -> bool:
    """Print the diff from the last golden; True (nothing to bless) when nothing changed."""
    old = last["metrics"]["train_loss"]["values"]
    new = golden["metrics"]["train_loss"]["values"]
    common = set(old) & set(new)  # any order: max_rel pairs the two lists position by position
    rel = max_rel([new[s] for s in common], [old[s] for s in common])
    same_export = last.get("export", {}).get("files") == golden.get("export", {}).get("files")
    same_run = last.get("run") in (None, golden["run"])
    # every value of the other series too: a golden with an old val loss (an eval fixed since) would
    # otherwise fail fresh_train forever while bless says "nothing to bless"
    moved = [k.replace("_", " ") for k in ("val_loss", "grad_norm") if _values(last, k) != _values(golden, k)]
    if (
        rel == 0.0
        and old.keys() == new.keys()
        and not moved
        and same_export
        and same_run
        and last["config_hash"] == golden["config_hash"]
        and last["tier"] == golden["tier"]
    ):
        print(f"golden for {env_id} is identical to v{last['version']}: nothing to bless")
        return True
    print(
        f"diff from {env_id} v{last['version']}: train loss max rel {rel:.3g} over {len(common)} steps, "
        f"export md5 {'unchanged' if same_export else 'changed'}, parameter digest "
        f"{'unchanged' if same_run else 'changed'}, config_hash {shown(last['config_hash'])} -> "
        f"{shown(golden['config_hash'])}, tier {last['tier']} -> {golden['tier']}"
        + "".join(f", {k} changed" for k in moved)
    )
    return False


def _values(golden: dict[str, Any], series: str) -> dict[str, float] | None:
    """A golden's recorded values of one series (None: not recorded, as grad norms before runrecord 1.3)."""
    return golden["metrics"].get(series, {}).get("values")


# -- pin ----------------------------------------------------------------------------------------------


def pin_checkpoint(reg: Registry, ckpt: Path, model: str, reason: str) -> int:
    check_name(model, "--model", "model")
    ckpt = resolve_checkpoint(ckpt)
    check_checkpoint(ckpt)  # valid safetensors, equal to the md5 its state.json recorded
    dest = inside(reg.root, reg.pinned_dir(model))
    if dest.exists():
        raise RegistryError(
            f"{dest} exists: a pinned checkpoint is never replaced; pin under a new model name"
        )
    with outputs.staged_folder(dest, outputs.PINNED) as tmp:  # a fresh folder beside dest, never reused
        for name in ("model.safetensors", "state.json", "tokenizer.json"):
            shutil.copyfile(ckpt / name, tmp / name)  # the optimizer state is not needed to export
        pin = seal(
            {
                "format": "xtrain-registry-pin/1",
                "model": model,
                "model_md5": md5_file(tmp / "model.safetensors"),
                "state_md5": md5_file(tmp / "state.json"),
                "tokenizer_md5": md5_file(tmp / "tokenizer.json"),
                "provenance": provenance(),
                "reason": reason,
            }
        )
        validate(pin, load_schema("pinned.schema.json"), str(dest / "pin.json"))
        atomic_write_json(tmp / "pin.json", pin)
    reg.record(
        *(dest / name for name in (*PINNED_FILES, "pin.json"))
    )  # the registry's index (registry/index.py)
    print(f"pinned {ckpt} as {dest} (model md5 {pin['model_md5']})")
    return 0


# -- list ---------------------------------------------------------------------------------------------


def list_all(reg: Registry) -> int:
    """Every version, golden and baseline, one line each: the files' own text (a reason, a time) is
    escaped (contracts.errors.shown): a reason holding a newline printed a forged `v9` line."""
    for model in reg.models():
        print(f"model {shown(model)}")
        for e in reg.versions(model):
            d = e.data
            md5 = d["files"].get("model.safetensors", "-")
            print(
                f"  v{e.version}  {shown(d['dtype']):<5} model.safetensors {shown(md5)}  "
                f"{shown(d['provenance']['time_utc'])}  {shown(d['reason'])}"
            )
    for env_id in reg.env_ids():
        print(f"golden {shown(env_id)}")
        for e in reg.goldens(env_id):
            d = e.data
            n = len(d["metrics"]["train_loss"]["values"])
            when = shown(d["provenance"]["time_utc"])
            print(f"  v{e.version}  {shown(d['tier']):<6} {n} steps  {when}  {shown(d['reason'])}")
    for env_id in reg.baseline_env_ids():
        print(f"perf baseline {shown(env_id)}")
        for e in reg.baselines(env_id):
            stages = shown(", ".join(e.data["stages"]))
            print(
                f"  v{e.version}  {stages}  {shown(e.data['provenance']['time_utc'])}  {shown(e.data['reason'])}"
            )
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m registry", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", help="registry folder (default: the registry package)")
    add_params_args(ap, overrides=False)  # pragma: no mutate -- equivalent: None is as falsy as False
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    sub.add_parser("validate")
    sub.add_parser("index", help="write registry/index.json for a registry that has none")
    v = sub.add_parser("verify")
    v.add_argument("export_dir", nargs="?", default="exports/pinned")
    v.add_argument("--model")
    v.add_argument("--version", type=int)
    outputs.output_flag(v.add_argument("--report", help="also write the result as JSON"), CHECK_REPORT)
    v.add_argument(
        "--no-fail", action="store_true", help="exit 0 on a mismatch (record only; the gates decide)"
    )
    b = sub.add_parser("bless")
    b.add_argument("--reason")
    b.add_argument("--model")
    b.add_argument("--export", help="default: exports/pinned (version) or exports/fresh (golden)")
    b.add_argument("--golden", action="store_true", help="bless this environment's golden from a fresh run")
    b.add_argument("--metrics", default="runs/single/metrics.json")
    b.add_argument("--perf", action="store_true", help="bless this environment's perf baseline from --runs")
    b.add_argument("--runs", default="runs", help="--perf: folder of the training stages' run folders")
    b.add_argument("--tier", choices=["exact", "approx"], help="golden tier (default: exact on cpu)")
    p = sub.add_parser("pin")
    p.add_argument("checkpoint")
    p.add_argument("--model", required=True)
    p.add_argument("--reason")
    return ap


def bless(reg: Registry, args: argparse.Namespace) -> int:
    """`bless`: a perf baseline (--perf), a golden (--golden), or the next export version."""
    reason = need_reason(args.reason)
    if args.perf:
        return bless_baseline(reg, Path(args.runs), reason, args.params)
    if args.golden:
        return bless_golden(reg, Path(args.metrics), golden_export(args), args.tier, reason, args.params)
    export_dir = Path(args.export or "exports/pinned")
    return bless_version(reg, export_dir, args.model or default_model(args.params), reason, args.params)


def golden_export(args: argparse.Namespace) -> Path | None:
    """The export a golden records: --export, else exports/fresh where it exists; None for a project
    without an export stage (its golden is the run alone: trajectory and parameter digest)."""
    if args.export:
        return Path(args.export)
    fresh = Path("exports/fresh")
    return fresh if fresh.exists() else None


def golden_registry(args: argparse.Namespace) -> Registry:
    """Where a golden goes: --root, else ./registry of the project in the working directory (the
    registry `python -m gates check` reads there), else the package's own."""
    if args.root:
        return Registry(args.root)
    return Registry(Path("registry")) if Path("dvc.yaml").is_file() else Registry()


def verify_command(reg: Registry, args: argparse.Namespace) -> int:
    """`verify`: each file's expected and actual md5; exit 1 on a mismatch unless --no-fail."""
    export_dir = Path(args.export_dir)
    if args.report:  # before anything is read: never a report over a file this command did not write
        outputs.check(args.report, CHECK_REPORT)
    report = verify(reg, export_dir, args.model or default_model(args.params), args.version)
    if args.report:
        artifact_table.write("registry_check", args.report, report)
    print_verify(report, export_dir)
    return 0 if report["passed"] or args.no_fail else 1


@cli
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    reg = golden_registry(args) if args.cmd == "bless" and args.golden else Registry(args.root or ROOT)
    if args.cmd == "list":
        return list_all(reg)
    if args.cmd == "validate":
        print(f"registry: {validate_everything(reg)} files valid, {reg.verify_index()} indexed")
        return 0
    if args.cmd == "verify":
        return verify_command(reg, args)
    check_root(reg)  # index, bless, pin: the commands that write
    root = reg.root.resolve()
    root.parent.mkdir(parents=True, exist_ok=True)  # a new registry's folder: its lock sits beside it
    with lockfile.held(root, f"python -m registry {args.cmd}"):  # one writer at a time
        return write_command(reg, args)


def write_command(reg: Registry, args: argparse.Namespace) -> int:
    """index, bless or pin, under the registry's lock (a second writer waits, or fails naming this one)."""
    if args.cmd == "index":
        print(f"registry: indexed {index.create(reg.root)} files in {reg.root / index.INDEX}")
        return 0
    if args.cmd == "bless":
        return bless(reg, args)
    if args.cmd == "pin":
        return pin_checkpoint(reg, Path(args.checkpoint), args.model, need_reason(args.reason))
    return 2  # pragma: no mutate -- equivalent: argparse admits only the commands above


if __name__ == "__main__":
    sys.exit(main())
