"""python -m gates: run the hard gates on the pipeline's artifacts.

    python -m gates check [--only ID ...] [--json] [--report PATH]   exit 0 pass, 1 a gate failed, 2 bad artifact
    python -m gates list                                             the catalogue with thresholds
    python -m gates explain ID                                       what a gate checks, why, how to investigate

Thresholds come from params.yaml `gates:` (validated by gates/schemas/thresholds.schema.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from gates import catalogue, report
from gates.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from gates.dvclock import DvcLock, LockError
from gates.outcome import Outcome
from xtrain.config import load_params
from xtrain.validate import ValidationError, load_schema, validate


def load_thresholds(params: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(params.read_text())
    except FileNotFoundError:
        raise ValidationError(
            str(params), "", "file not found", "run from the repository root or pass --params"
        ) from None
    except yaml.YAMLError as e:
        raise ValidationError(str(params), "", f"not valid YAML: {e}") from None
    if not isinstance(raw, dict) or "gates" not in raw:
        raise ValidationError(str(params), "gates", "missing required key", "a gates: section")
    validate(raw["gates"], load_schema("gates", "thresholds.schema.json"), f"{params} (gates)")
    return raw["gates"]


def run_gate(gate: catalogue.Gate, artifacts: Artifacts, thresholds: dict[str, Any]) -> Outcome:
    view = artifacts.for_gate()
    try:
        outcome = gate.run(view, thresholds)
    except StageNotRun as e:
        outcome = Outcome("skip", None, gate.threshold(thresholds), str(e))
    except NonFinite as e:
        outcome = Outcome("fail", "non-finite", gate.threshold(thresholds), f"{e}: non-finite values fail")
    except (ArtifactError, ValidationError) as e:
        outcome = Outcome("error", None, gate.threshold(thresholds), str(e))
    if outcome.threshold is None:
        outcome.threshold = gate.threshold(thresholds)
    outcome.artifacts = view.read
    return outcome


def check(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    root = Path(args.root)
    thresholds = load_thresholds(root / args.params)  # an absolute --params stays absolute
    params = load_params(root / args.params)  # what the runs must have been (shapes, worlds, config)
    gates = catalogue.select(args.only)
    try:
        artifacts = Artifacts(root, DvcLock.read(root), params)
    except LockError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    outcomes = {g.id: run_gate(g, artifacts, thresholds) for g in gates}
    env_id = None
    metrics = root / "runs" / "single" / "metrics.json"
    if metrics.exists():
        try:
            env_id = json.loads(metrics.read_text())["env"]["env_id"]
        except (ValueError, KeyError, TypeError):
            env_id = None
    rep = report.build(outcomes, root, str(args.params), env_id)
    report_path = root / args.report
    report.write(rep, report_path)
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        report.print_table(outcomes, {g.id: g.threshold(thresholds) for g in gates}, report_path)
        print(f"checked {len(gates)} gates in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
    return rep["exit_code"]


def list_gates(args: argparse.Namespace) -> int:
    thresholds = load_thresholds(Path(args.root) / args.params)
    width = max(len(g.id) for g in catalogue.GATES)
    for g in catalogue.GATES:
        print(f"{g.id:<{width}}  {g.threshold(thresholds)}")
        print(f"{'':<{width}}  {g.checks}")
    return 0


def explain(args: argparse.Namespace) -> int:
    g = catalogue.get(args.id)
    thresholds = load_thresholds(Path(args.root) / args.params)
    print(f"{g.id}\n")
    print(f"checks:      {g.checks}")
    print(f"threshold:   {g.threshold(thresholds)}")
    print(f"why:         {g.why}")
    print(f"investigate: {g.investigate}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gates", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", default=".", help="the repository (artifacts, dvc.lock, registry/)")
    ap.add_argument("--params", default="params.yaml")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run the gates")
    c.add_argument("--only", nargs="+", metavar="ID", help="gate ids or prefixes (loss_match selects both)")
    c.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    c.add_argument("--report", default="reports/gates.json")
    sub.add_parser("list", help="the catalogue with thresholds")
    e = sub.add_parser("explain", help="what a gate checks, why, how to investigate a failure")
    e.add_argument("id")
    args = ap.parse_args(argv)
    try:
        return {"check": check, "list": list_gates, "explain": explain}[args.cmd](args)
    except ValidationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
