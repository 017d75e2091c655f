"""Mutation testing of the judge (gates/, registry/, contracts/, params/) with mutmut: who judges the judge.

    python3 tests/judge_mutation.py --all               # the whole campaign; report in docs/data/
    python3 tests/judge_mutation.py --changed           # CI: the functions changed since the baseline
    python3 tests/judge_mutation.py --files gates/judges/tolerance.py [--mutants 'gates.tolerance.x_*']

mutmut (pyproject.toml [tool.mutmut]) runs in a scratch copy of the checkout, so the checkout is never
touched and the copy's pyproject can narrow what is mutated. --changed mutates only the functions
whose source differs from tests/judge_mutation_baseline.json (written by --all): a change that lets a
mutant of what it touched survive exits 1, naming each survivor with its diff. An equivalent mutant
is marked where it is made, `# pragma: no mutate` with the reason in the same comment. Exit 0: every
mutant run was killed (or timed out); 1: survivors; 2: the campaign could not run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JUDGE = ("gates", "registry", "contracts", "params")
BASELINE = REPO / "tests" / "judge_mutation_baseline.json"
CI_TESTS = ["@tests/judge_mutation_tests.txt"]  # --changed: the fast unit tests, not the gate tree
CAUGHT = ("killed", "timeout")  # a mutant that hangs the tests is caught: the suite did not pass
MAX_CHILDREN = os.environ.get("JUDGE_MUTATION_CHILDREN", "2")


class CampaignError(Exception):
    """The campaign could not run (exit 2)."""


@dataclass(frozen=True)
class Result:
    name: str  # mutmut's: module.function__mutmut_N
    status: str
    diff: str = ""

    @property
    def module(self) -> str:
        return self.name.partition("__mutmut_")[0].rpartition(".")[0]


def judge_files(root: Path = REPO) -> list[str]:
    """Every mutated source file of the judge, relative to the checkout."""
    return sorted(p.relative_to(root).as_posix() for d in JUDGE for p in (root / d).rglob("*.py"))


def function_hashes(path: Path) -> dict[str, str]:
    """mutmut's key of every function and method (x_name, xǁClassǁname) -> hash of its AST."""
    from mutmut.mutation.file_mutation import compute_function_hashes

    return compute_function_hashes(path.read_text())


def mutated_functions(path: Path, rel: str) -> dict[str, int]:
    """Functions of one file that have mutants, with how many (pragmas honoured)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    names = mutate_file_contents(rel, path.read_text()).mutant_names
    return dict(Counter(n.partition("__mutmut_")[0] for n in names))


def snapshot(root: Path = REPO) -> dict[str, dict[str, str]]:
    return {rel: function_hashes(root / rel) for rel in judge_files(root)}


def changed_functions(root: Path = REPO) -> dict[str, list[str]]:
    """{file: [function keys]} whose AST differs from the baseline's (new ones included)."""
    if not BASELINE.exists():
        raise CampaignError(f"{BASELINE.relative_to(REPO)} missing: run the whole campaign (--all) first")
    base = json.loads(BASELINE.read_text())["functions"]
    out = {}
    for rel, now in snapshot(root).items():
        then = base.get(rel, {})
        keys = sorted(k for k, h in now.items() if then.get(k) != h)
        if keys:
            out[rel] = keys
    return out


def copy_checkout(work: Path) -> None:
    """The checkout's tracked and untracked-not-ignored files (what a commit would hold) into `work`."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in filter(None, (f.decode() for f in files)):
        src = REPO / rel
        if src.is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    # mutants/ is the tests' REPO: tests that open it with DVC need it to be a git repository
    (work / "mutants").mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(work / "mutants")], check=True)


def narrow(work: Path, files: list[str], tests: list[str] | None = None) -> None:
    """The copy's [tool.mutmut] mutates only `files` (the rest of the judge is copied unmutated) and,
    where `tests` is given, runs only those (pytest arguments: files, node ids, @lists)."""
    path = work / "pyproject.toml"
    text = path.read_text()
    if re.search(r"^only_mutate\s*=", text, re.M):
        raise CampaignError("pyproject.toml [tool.mutmut] sets only_mutate: the driver sets it per run")
    text = text.replace("[tool.mutmut]\n", f"[tool.mutmut]\nonly_mutate = {json.dumps(files)}\n", 1)
    if tests is not None:
        selection = re.compile(r"^pytest_add_cli_args_test_selection = .*$", re.M)
        if not selection.search(text):
            raise CampaignError(
                "pyproject.toml [tool.mutmut] has no one-line pytest_add_cli_args_test_selection"
            )
        text = selection.sub(lambda _: f"pytest_add_cli_args_test_selection = {json.dumps(tests)}", text)
    path.write_text(text)


def run_mutmut(work: Path, mutants: list[str]) -> int:
    cmd = ["nice", "-n", "15", sys.executable, "-c", "from mutmut.__main__ import cli; cli()"]
    cmd += ["run", "--max-children", MAX_CHILDREN, *mutants]
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HYPOTHESIS_PROFILE": "judge-mutation",
        "JUDGE_MUTATION_WORK": str(work),  # where the plugin keeps the gate tree it built once
        # tests/judge_mutation_plugin.py; the code under test comes first anyway (mutmut, tests/conftest.py);
        # an offline runner's wheelhouse stays behind it
        "PYTHONPATH": os.pathsep.join(filter(None, [str(work / "tests"), os.environ.get("PYTHONPATH")])),
    }
    print("+", " ".join(cmd), f"(in {work})", flush=True)
    return subprocess.run(cmd, cwd=work, env=env).returncode


def results(work: Path, files: list[str]) -> list[Result]:
    """Every mutant mutmut ran (or found untested), with the diff of each one that was not caught."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    out = []
    here = os.getcwd()
    os.chdir(work)
    try:
        for rel in files:
            meta = work / "mutants" / f"{rel}.meta"
            if not meta.exists():
                continue
            for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
                if code is None:
                    continue
                status = status_by_exit_code[code]
                diff = "" if status in CAUGHT else get_diff_for_mutant(name, path=rel)
                out.append(Result(name, status, diff))
    finally:
        os.chdir(here)
    return out


def module_of(rel: str) -> str:
    return rel[:-3].replace("/", ".")


def campaign(
    files: list[str],
    mutants: list[str],
    work: Path | None,
    tests: list[str] | None = None,
    mutate: list[str] | None = None,
) -> list[Result]:
    """mutmut over `files` (only `mutants` where given, only `tests` where given) in a copy of the
    checkout; its results. Mutants are made for `mutate` (default: the whole judge, so a kept work
    folder's cache and mutmut's test map stay whole from one run to the next) and run by name."""
    fresh = work is None
    work = Path(tempfile.mkdtemp(prefix="judge-mutation-")) if work is None else work
    work.mkdir(parents=True, exist_ok=True)
    try:
        copy_checkout(work)
        mutate = mutate or judge_files()
        for rel in mutate:  # copied unmutated by an earlier run of other files: mutmut would keep it so
            if not (work / "mutants" / f"{rel}.meta").exists():
                (work / "mutants" / rel).unlink(missing_ok=True)
        narrow(work, mutate, tests)
        rc = run_mutmut(work, mutants or [f"{module_of(f)}.*" for f in files])
        if rc != 0:
            raise CampaignError(
                f"mutmut exited {rc} (clean tests failing, or no test covers the mutants): see above"
            )
        return results(work, files)
    finally:
        if fresh:
            shutil.rmtree(work, ignore_errors=True)


def summary(rs: list[Result]) -> dict[str, dict[str, int]]:
    """Per module: how many mutants ended in each status."""
    table: dict[str, Counter] = {}
    for r in rs:
        table.setdefault(r.module, Counter())[r.status] += 1
    return {m: dict(c) for m, c in sorted(table.items())}


def print_survivors(rs: list[Result]) -> None:
    bad = [r for r in rs if r.status not in CAUGHT]
    for r in bad:
        print(f"\n--- {r.status}: {r.name}\n{r.diff.strip()}")
    caught = sum(r.status in CAUGHT for r in rs)
    print(f"\n{caught}/{len(rs)} mutants caught, {len(bad)} not: " + ", ".join(r.name for r in bad[:20]))


def merged_results(works: list[Path]) -> list[Result]:
    """Every mutant's result over several work folders of the same source: caught in any is caught."""
    best: dict[str, Result] = {}
    for work in works:
        done = [f for f in judge_files() if (work / "mutants" / f"{f}.meta").exists()]
        for r in results(work, done):
            if r.name not in best or (r.status in CAUGHT and best[r.name].status not in CAUGHT):
                best[r.name] = r
    return list(best.values())


def cmd_changed(work: Path | None, tests: list[str] | None) -> int:
    changed = changed_functions()
    if not changed:
        print("judge mutation: no judge function changed since the baseline")
        return 0
    globs = []
    for rel, keys in changed.items():
        have = mutated_functions(REPO / rel, rel)
        globs += [f"{module_of(rel)}.{k}__mutmut_*" for k in keys if k in have]
    print(f"judge mutation: {sum(map(len, changed.values()))} changed functions, {len(globs)} with mutants")
    if not globs:
        return 0
    rs = campaign(sorted(changed), globs, work, tests or CI_TESTS, mutate=sorted(changed))
    print_survivors(rs)
    return 0 if all(r.status in CAUGHT for r in rs) else 1


def suppressed(rel: str) -> int:
    """Mutants a file's `# pragma: no mutate` lines keep from being made (the equivalent ones)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    text = (REPO / rel).read_text()
    bare = re.sub(r"#\s*pragma:\s*no mutate[^\n]*", "", text)
    made = len(mutate_file_contents(rel, text).mutant_names)
    return len(mutate_file_contents(rel, bare).mutant_names) - made if bare != text else 0


def not_run(work: Path | None, rel: str) -> int:
    """Mutants of a file that mutmut made in `work` but has no result for (a partial campaign)."""
    meta = work / "mutants" / f"{rel}.meta" if work else None
    if meta is None or not meta.exists():
        return 0
    return sum(code is None for code in json.loads(meta.read_text())["exit_code_by_key"].values())


def module_rows(rs: list[Result], files: list[str], work: Path | None = None) -> list[dict]:
    """Per file: mutants judged, killed, timeout, survived, no tests, equivalent (pragma), not run, score."""
    rows = []
    for rel in files:
        mine = [r for r in rs if r.module == module_of(rel)]
        if not mine:
            continue
        count = Counter(r.status for r in mine)
        caught = count["killed"] + count["timeout"]
        rows.append(
            {
                "file": rel,
                "mutants": len(mine),
                "equivalent": suppressed(rel),
                **{k: count[k] for k in ("killed", "timeout", "survived", "no tests")},
                "other": len(mine) - caught - count["survived"] - count["no tests"],
                "not run": not_run(work, rel),
                "score": round(caught / len(mine), 4),
            }
        )
    return rows


def markdown(report: dict) -> str:
    head = "| file | mutants | equivalent (pragma) | killed | timeout | survived | no tests | other | not run | score |"
    lines = [
        f"# Judge mutation campaign, {report['date']} (git {report['git_revision'][:10]})",
        "",
        f"Score (killed + timeout) / mutants made (equivalents are not made): **{report['score']:.1%}** "
        f"({report['caught']} of {report['mutants']}); {report['equivalent']} equivalent mutants marked.",
        "",
        head,
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['file']} | {r['mutants']} | {r['equivalent']} | {r['killed']} | {r['timeout']} | "
            f"{r['survived']} | {r['no tests']} | {r['other']} | {r['not run']} | {r['score']:.1%} |"
            for r in report["modules"]
        ),
        "",
        "## Not caught",
        "",
    ]
    for m in report["not_caught"]:
        lines += [f"### {m['status']}: `{m['name']}`", "", "```diff", m["diff"].strip(), "```", ""]
    return "\n".join(lines) + "\n"


def write_report(rs: list[Result], files: list[str], out: Path, work: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    caught = sum(r.status in CAUGHT for r in rs)
    rows = module_rows(rs, files, work)
    report = {
        "format": "xtrain-judge-mutation/1",
        "date": datetime.date.today().isoformat(),
        "git_revision": subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "mutmut": importlib.metadata.version("mutmut"),
        "mutants": len(rs),
        "caught": caught,
        "score": round(caught / len(rs), 4) if rs else None,
        "equivalent": sum(r["equivalent"] for r in rows),
        "statuses": dict(Counter(r.status for r in rs)),
        "modules": rows,
        "not_caught": [
            {"name": r.name, "status": r.status, "diff": r.diff} for r in rs if r.status not in CAUGHT
        ],
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(markdown(report))
    print(f"report: {out / 'report.json'}, {out / 'report.md'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--all", action="store_true", help="the whole judge; writes the report and baseline")
    mode.add_argument("--changed", action="store_true", help="functions changed since the baseline (CI)")
    mode.add_argument("--files", nargs="+", help="these judge files")
    mode.add_argument(
        "--report-from",
        type=Path,
        nargs="+",
        help="no run: the report of the results in these work folders (a mutant caught in any is caught: "
        "a unit-test pass, then a pass of its survivors with the tree tests; the same source in each)",
    )
    mode.add_argument(
        "--baseline",
        action="store_true",
        help="only record the judge's functions as the baseline (what --all does after its run): for "
        "after a campaign was read, e.g. one measured before a merge that moved code",
    )
    ap.add_argument("--mutants", nargs="*", default=[], help="mutmut name globs within --files")
    ap.add_argument(
        "--tests",
        nargs="+",
        help="pytest arguments selecting the tests (default: pyproject's; "
        "--changed: tests/judge_mutation_tests.txt)",
    )
    ap.add_argument("--work", type=Path, help="reuse this work folder (mutmut's cache); default: a fresh one")
    ap.add_argument("--report", type=Path, help="write report.json here (default with --all: docs/data/...)")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except CampaignError as e:
        print(f"judge mutation: {e}", file=sys.stderr)
        return 2


def write_baseline() -> None:
    BASELINE.write_text(json.dumps({"functions": snapshot()}, indent=1, sort_keys=True) + "\n")
    print(f"baseline: {BASELINE.relative_to(REPO)}")


def run(args: argparse.Namespace) -> int:
    if args.report_from:
        rs = merged_results(args.report_from)
        print_survivors(rs)
        done = sorted({f for f in judge_files() if any(r.module == module_of(f) for r in rs)})
        out = args.report or REPO / "docs" / "data" / f"judge-mutation-{datetime.date.today()}"
        write_report(rs, done, out, args.report_from[0])
        return 0 if all(r.status in CAUGHT for r in rs) else 1
    if args.baseline:
        write_baseline()
        return 0
    if args.changed:
        return cmd_changed(args.work, args.tests)
    files = judge_files() if args.all else args.files
    unknown = sorted(set(files) - set(judge_files()))
    if unknown:
        print(f"not judge files: {unknown}", file=sys.stderr)
        return 2
    with_mutants = [f for f in files if mutated_functions(REPO / f, f)]  # __init__.py has none
    rs = campaign(with_mutants, args.mutants, args.work, args.tests)
    print_survivors(rs)
    report = args.report or (
        REPO / "docs" / "data" / f"judge-mutation-{datetime.date.today().isoformat()}" if args.all else None
    )
    if report:
        write_report(rs, files, report)
    if args.all:
        write_baseline()
    return 0 if all(r.status in CAUGHT for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
