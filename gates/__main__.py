"""python -m gates: run the hard gates on the pipeline's artifacts.

    python -m gates check [--only ID ...] [--json] [--report PATH]   exit 0 pass, 1 a gate failed, 2 error (bad
                          [--html PATH] [--junit PATH] [--markdown PATH]   artifact, stale tree, nothing judged),
                          [--strict]                                 3 no gate failed, N inconclusive (--strict: 1)
    python -m gates diff A.json B.json                                what changed; exit 1 if a gate got worse
    python -m gates list                                             the catalogue with thresholds
    python -m gates docs [--write]                                   README/docs threshold tables vs params.yaml
    python -m gates explain ID                                       what a gate checks, why, how to investigate
    python -m gates bisect GOOD BAD [--gate ID]                      first commit where the gate fails (docs/bisect.md)
    python -m gates mutate [--only ID ...] [--subset ci] [--jobs N]  mutation campaign: which gates catch which bug
                           [--profile tiny] [--json PATH] [--strict]   (docs/mutation.md); exit 1 on a hole
    python -m gates init [FOLDER]                                    your own trainer, gated (docs/byo-trainer.md)
    python -m gates init --train 'python3 train.py ARGS' [--dry-run] beside an existing trainer

Thresholds come from params.yaml `gates:` (validated by contracts/schemas/thresholds.schema.json).
A project that gates its own trainer has a params file of its own (no model:/train:): its runs are
judged from their records, and the `gates:` sections it leaves out are the harness's (params/project.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import errors, outputs
from contracts.validate import ValidationError
from gates.judges import catalogue
from gates.judges.outcome import Outcome
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from gates.reading.dvclock import DvcLock, LockError
from gates.reporting import ci_report, report, verdict
from params.cli import add_params_args
from params.project import load_judging, thresholds_source

REPORT_KIND = outputs.json_kind("gates report", report.FORMAT)


@dataclass
class Reading:
    """One gate's records, read before any gate judges; `outcome` when they could not be read."""

    view: Artifacts
    records: Any = None
    outcome: Outcome | None = None


def guarded(step: Callable[[], Any]) -> tuple[Any, Outcome | None]:
    """A step of a gate (reading, or judging a gate not yet split), its refusals as outcomes."""
    try:
        return step(), None
    except StageNotRun as e:
        return None, Outcome("skip", message=str(e))
    except NonFinite as e:
        return None, Outcome("fail", "non-finite", message=f"{e}: non-finite values fail")
    except (ArtifactError, ValidationError) as e:
        return None, Outcome("error", message=str(e))


def read_gate(gate: catalogue.Gate, artifacts: Artifacts, thresholds: dict[str, Any]) -> Reading:
    view = artifacts.for_gate()
    if absent := catalogue.not_in_pipeline(gate, artifacts.lock.in_pipeline):
        return Reading(view, outcome=Outcome(
            "skip",
            None,
            gate.threshold(thresholds),
            f"{'stage' if len(absent) == 1 else 'stages'} {', '.join(absent)} "
            f"{'has' if len(absent) == 1 else 'have'} not run: not in this project's pipeline (dvc.yaml, "
            "dvc.lock), nothing to judge",
            not_in_pipeline=absent,
        ))  # fmt: skip
    records, refused = guarded(lambda: gate.read(view, thresholds))
    return Reading(view, records, refused)


def judge_gate(gate: catalogue.Gate, reading: Reading, thresholds: dict[str, Any]) -> Outcome:
    outcome = reading.outcome
    if outcome is None:
        outcome, refused = guarded(lambda: gate.judge(reading.records, thresholds))
        outcome = outcome or refused
    if outcome.threshold is None:  # the gate's own, unless its outcome names one
        outcome.threshold = gate.threshold(thresholds)
    outcome.artifacts = reading.view.read
    return outcome


def run_gate(gate: catalogue.Gate, artifacts: Artifacts, thresholds: dict[str, Any]) -> Outcome:
    return judge_gate(gate, read_gate(gate, artifacts, thresholds), thresholds)


def run_env_id(artifacts: Artifacts) -> str | None:
    """The environment runs/single measured in (the report names it); None if it cannot be read."""
    try:
        metrics = artifacts.for_gate().json(
            "runs/single/metrics.json",
            "metrics.schema.json",
            "train_single",
            refuse_non_finite=False,  # pragma: no mutate -- equivalent: None is False to `if refuse_non_finite`
        )
    except (ArtifactError, StageNotRun, ValidationError):
        return None
    return metrics["env"]["env_id"]


def refuse_folder_outputs(args: argparse.Namespace, root: Path) -> None:
    """An output path naming a folder is a bad argument: one line before any gate runs."""
    for flag in ("report", "html", "junit", "markdown"):
        path = getattr(args, flag)
        if path and (root / path).is_dir():
            raise ValidationError(
                str(root / path), f"--{flag}", "is a folder: refusing to write a report file over it",
                "a file path, e.g. reports/gates.html",
            )  # fmt: skip


def report_outputs(args: argparse.Namespace, root: Path) -> list[tuple[Path, outputs.Kind]]:
    """Every file check writes, with its kind: each is refused up front unless it is absent or a
    previous output of that kind (contracts/outputs.py), so a bad path costs no gate run."""
    kinds = (
        (args.report, REPORT_KIND),
        (args.junit, outputs.JUNIT_REPORT),
        (args.markdown, outputs.MARKDOWN_REPORT),
        (args.html, outputs.HTML_REPORT),
    )
    return [(root / p, kind) for p, kind in kinds if p]


def check(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    root = Path(args.root)
    refuse_folder_outputs(args, root)  # one line naming the flag
    for path, kind in report_outputs(args, root):  # absent, or a previous output of its kind
        outputs.check(path, kind)
    params = load_judging(root / args.params)  # an absolute --params stays absolute
    thresholds = params.thresholds  # read with what the runs must have been (shapes, worlds, config)
    gates = catalogue.select(args.only)
    try:
        artifacts = Artifacts(root, DvcLock.read(root), params, catalogue.stages_of(gates))
    except LockError as e:
        (root / args.report).unlink(missing_ok=True)  # no verdict: never leave an earlier one behind
        errors.report(e)
        return 2
    outcomes, seconds, readings = {}, {}, {}
    for g in gates:  # read once: every gate's records before any verdict
        start = time.perf_counter()
        readings[g.id] = read_gate(g, artifacts, thresholds)
        seconds[g.id] = time.perf_counter() - start
    for g in gates:  # then judge plain values
        start = time.perf_counter()
        outcomes[g.id] = judge_gate(g, readings[g.id], thresholds)
        seconds[g.id] += time.perf_counter() - start
    source = thresholds_source(params, str(args.params))
    rep = report.build(outcomes, root, source, run_env_id(artifacts), args.strict)
    report_path = root / args.report
    report.write(rep, report_path)
    if args.json:
        print(json.dumps(rep, indent=2))
        if rep["verdict"] == "nothing judged":  # the table's last line says it; here stderr does
            print(f"error: nothing judged: {verdict.nothing_judged(rep['gates'])}; exit 2", file=sys.stderr)
    else:
        labels = {g.id: g.threshold(thresholds) for g in gates}
        report.print_table(outcomes, labels, report_path, strict=args.strict)
        print(f"checked {len(gates)} gates in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
    write_formats(args, rep, root, thresholds, seconds, params)
    return rep["exit_code"]


def write_formats(
    args: argparse.Namespace,
    rep: dict[str, Any],
    root: Path,
    thresholds: dict[str, Any],
    seconds: dict,
    params: Any,
) -> None:
    """--junit, --markdown, --html; relative paths are under --root, like --report."""
    labels = {g.id: g.threshold(thresholds) for g in catalogue.GATES}
    if args.junit:
        outputs.write_file(root / args.junit, ci_report.junit_xml(rep, seconds), outputs.JUNIT_REPORT)
    if args.markdown:
        outputs.write_file(root / args.markdown, ci_report.markdown(rep, labels), outputs.MARKDOWN_REPORT)
    if args.html:
        t0 = time.perf_counter()
        from gates.reporting import html_report  # matplotlib: imported only when a page is asked for

        page = html_report.render(rep, root, thresholds, labels, params)
        outputs.write_file(root / args.html, page, outputs.HTML_REPORT)
        print(f"wrote {args.html} in {time.perf_counter() - t0:.2f}s", file=sys.stderr)


def diff(args: argparse.Namespace) -> int:
    from gates.reporting import diff as gates_diff

    return gates_diff.run(args.a, args.b)


def list_gates(args: argparse.Namespace) -> int:
    """The catalogue with the thresholds a run of this params file is judged by (prefixes capped by its
    steps, as the report and the generated docs say them)."""
    from gates.reporting.threshold_docs import capped_for_run

    params = load_judging(Path(args.root) / args.params)
    thresholds = capped_for_run(params) if "train" in params.raw else params.thresholds
    width = max(len(g.id) for g in catalogue.GATES)
    for g in catalogue.GATES:
        print(f"{g.id:<{width}}  {g.threshold(thresholds)}")
        print(f"{'':<{width}}  {g.checks}")
    return 0


def explain(args: argparse.Namespace) -> int:
    g = catalogue.get(args.id)
    thresholds = load_judging(Path(args.root) / args.params).thresholds
    print(f"{g.id}\n")
    print(f"checks:      {g.checks}")
    print(f"threshold:   {g.threshold(thresholds)}")
    print(f"why:         {g.why}")
    print(f"investigate: {g.investigate}")
    return 0


def docs_cmd(args: argparse.Namespace) -> int:
    """The threshold tables of README.md and docs/ against params.yaml: 0 equal (or rewritten), 1 not."""
    from gates.reporting import threshold_docs

    root = Path(args.root)
    found = threshold_docs.check(root, root / args.params, args.write)
    for path, names in found.changed.items():
        said = "rewrote" if args.write else "differs from params.yaml:"
        print(f"{path}: {said} generated section {', '.join(names)}")
    for name in found.missing:
        print(f"no document has the generated section {name} ({threshold_docs.START.format(name=name)})")
    if found.changed and not args.write:
        print("next: python3 -m gates docs --write (then review and commit the tables)")
    if found.missing or (found.changed and not args.write):
        return 1
    print(f"threshold tables {'written from' if found.changed else 'equal'} {args.params}")
    return 0


def bisect_cmd(args: argparse.Namespace) -> int:
    from gates.campaigns import bisect, children

    root = Path(args.root).resolve()
    try:
        with children.ending_on_signal("gates bisect"):  # a signal ends its children: one line, 128+sig
            return bisect.bisect(
                root,
                root,
                root / args.params,
                args.good,
                args.bad,
                args.gate,
                Path(args.cache) if args.cache else None,
            )
    except bisect.BisectError as e:
        errors.report(e)
        return 2
    except children.Interrupted as e:
        return errors.report(e)


def mutate_cmd(args: argparse.Namespace) -> int:
    import os

    from gates.campaigns import children, mutants, mutate

    root = Path(args.root).resolve()
    if args.json:  # before the campaign (hours): never a report over a file this command did not write
        outputs.check(args.json, mutate.REPORT)
    try:
        work = Path(args.work) if args.work else mutate.git_common_dir(root) / "xtrain-mutate" / args.profile
        outputs.check(work, mutate.WORK)  # absent, empty, or an earlier campaign's: its base is rebuilt
        cat = mutants.load(Path(args.catalogue) if args.catalogue else mutants.CATALOGUE)
        picked = cat.select(args.only, args.subset)
        if args.timeout:
            cat = dataclasses.replace(cat, timeout_s=args.timeout)
        cores = os.cpu_count() or 2  # pragma: no mutate -- equivalent: any fallback below 4 gives one job
        jobs = args.jobs or max(1, cores // 2)
        if args.skip_stage:
            cat = mutate.skipping(cat, args.skip_stage, picked, root)
        campaign = mutate.Campaign(root, work.resolve(), cat, args.profile, keep=args.keep)
        with children.ending_on_signal("gates mutate"):  # a signal ends its children: one line, 128+sig
            rep = mutate.run_campaign(campaign, picked, jobs)
    except (mutate.CampaignError, mutants.AnchorError) as e:
        errors.report(e)
        return 2
    except children.Interrupted as e:
        return errors.report(e)
    print(mutate.table(rep))
    if args.json:
        mutate.write(rep, Path(args.json))
    return mutate.exit_code(rep, args.strict)


def init_cmd(args: argparse.Namespace) -> int:
    from gates import scaffold

    folder = Path(args.folder)
    todo = scaffold.plan(folder, args.train)
    print("\n".join(f"plan: {line}" for line in todo.lines()))
    if args.dry_run:
        return 0
    print(f"{folder}: " + (", ".join(scaffold.apply(todo)) or "nothing done") + f"; next: {scaffold.NEXT}")
    return 0


def add_mutate_parser(sub: Any) -> None:
    from gates.campaigns.mutate import REPORT, WORK

    m = sub.add_parser(
        "mutate", help="mutation campaign: apply each catalogued bug, rerun, judge (docs/mutation.md)"
    )
    m.add_argument("--only", nargs="+", metavar="ID", help="mutant ids (default: the whole catalogue)")
    m.add_argument("--subset", choices=["ci"], help="ci: the small subset CI runs")
    m.add_argument("--jobs", type=positive, help="mutants at a time (default: cores / 2)")
    m.add_argument("--profile", default="default", help="params overrides from the catalogue (default, tiny)")
    json_help = "write the report (contracts/schemas/mutation_report)"
    outputs.output_flag(m.add_argument("--json", metavar="PATH", help=json_help), REPORT)
    m.add_argument(
        "--strict", action="store_true", help="also exit 1 when a mutant left the runs bitwise unchanged"
    )
    m.add_argument("--timeout", type=positive, help="seconds per mutant (default: the catalogue's)")
    work_help = "scratch folder (default: <git dir>/xtrain-mutate/<profile>)"
    outputs.output_flag(m.add_argument("--work", help=work_help), WORK)
    m.add_argument("--catalogue", help="the catalogue (default: gates/campaigns/mutants.yaml)")
    m.add_argument("--keep", action="store_true", help="keep each mutant's scratch tree")
    skip_help = "also leave out these stages and the gates that read them (e.g. pilot: a quicker CI campaign)"
    m.add_argument("--skip-stage", nargs="+", action="extend", default=[], metavar="STAGE", help=skip_help)


def positive(text: str) -> int:
    """An argparse type: an integer >= 1 (`--jobs 0` would start no worker and wait forever)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def add_check_parser(sub: Any) -> None:
    c = sub.add_parser("check", help="run the gates")
    c.add_argument("--only", nargs="+", metavar="ID", help="gate ids or prefixes (loss_match selects both)")
    c.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    strict = "count an inconclusive gate as a failure: exit 1 instead of 3 (the GPU nightly's rule)"
    c.add_argument("--strict", action="store_true", help=strict)
    outputs.output_flag(c.add_argument("--report", default="reports/gates.json"), REPORT_KIND)
    page = "also write a self-contained HTML page, a picture per gate"
    outputs.output_flag(c.add_argument("--html", metavar="PATH", help=page), outputs.HTML_REPORT)
    junit = "also write JUnit XML (one testcase per gate)"
    outputs.output_flag(c.add_argument("--junit", metavar="PATH", help=junit), outputs.JUNIT_REPORT)
    md = "also write a Markdown table (for $GITHUB_STEP_SUMMARY)"
    outputs.output_flag(c.add_argument("--markdown", metavar="PATH", help=md), outputs.MARKDOWN_REPORT)


def parser() -> argparse.ArgumentParser:
    from gates.campaigns.bisect import CACHE

    ap = argparse.ArgumentParser(
        prog="python -m gates", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", default=".", help="the repository (artifacts, dvc.lock, registry/)")
    add_params_args(ap, overrides=False)  # pragma: no mutate -- equivalent: None is False to `if overrides`
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_check_parser(sub)
    sub.add_parser("list", help="the catalogue with thresholds")
    docs = sub.add_parser(
        "docs", help="the threshold tables of README.md and docs/ against params.yaml; exit 1 if stale"
    )
    docs.add_argument("--write", action="store_true", help="regenerate the marked sections from params.yaml")
    e = sub.add_parser("explain", help="what a gate checks, why, how to investigate a failure")
    e.add_argument("id")
    d = sub.add_parser("diff", help="what changed between two gate reports; exit 1 if a gate got worse")
    d.add_argument("a", help="the earlier report (e.g. main's reports/gates.json)")
    d.add_argument("b", help="the later report")
    bi = sub.add_parser("bisect", help="the first commit between GOOD and BAD at which a gate fails")
    bi.add_argument("good")
    bi.add_argument("bad")
    bi.add_argument("--gate", help="gate id or prefix (default: every gate, the whole pipeline)")
    cache = "verdict cache (default: <git dir>/xtrain-bisect)"
    outputs.output_flag(bi.add_argument("--cache", help=cache), CACHE)
    add_mutate_parser(sub)
    i = sub.add_parser("init", help="a project of your own trainer, gated: train.py, dvc.yaml, params.yaml")
    i.add_argument("folder", nargs="?", default=".", help="where (default: here); made if absent")
    train = (
        "beside an existing trainer: its one-device command, e.g. 'python3 train.py --device=cpu' "
        "({run_dir} in it: runs/single, runs/proc)"
    )
    i.add_argument("--train", metavar="CMD", help=train)
    i.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        commands = {
            "check": check,
            "list": list_gates,
            "docs": docs_cmd,
            "explain": explain,
            "diff": diff,
            "bisect": bisect_cmd,
            "mutate": mutate_cmd,
            "init": init_cmd,
        }
        return commands[args.cmd](args)
    except (ValidationError, errors.XtrainError) as e:  # bad input, a refused output path: exit 2
        errors.report(e)
        return 2
    except KeyError as e:
        errors.report(errors.XtrainError(e.args[0]))
        return 2


if __name__ == "__main__":
    sys.exit(main())
