"""python -m gates bisect GOOD BAD [--gate ID]: the first commit at which a gate fails.

How a commit is judged: it is checked out in a scratch `git worktree`, DVC runs only the stages the
gate needs (`dvc repro STAGE...`, with their upstream; the worktree shares the repository's DVC
cache, so its run cache restores any stage whose code, params and inputs were seen before), then
the registry of that worktree is replaced by GOOD's and the gate runs. The judge is fixed: the gate
code and `gates:` thresholds of the checkout bisect runs from, and GOOD's registry (goldens,
blessed versions, perf baselines), so a bless made after GOOD cannot hide the regression. Only the
producers (code, params, dvc.yaml) change from commit to commit, and each commit's runs are judged
against that commit's OWN params.yaml (shapes, worlds, config identity) with only its `gates:`
section replaced by the judge's. A commit whose config identity differs from the last passing one's
and has no golden in GOOD's registry is named plainly: "config changed at <commit>, no golden: bless
it or revert".

Search: a plain binary search over `git rev-list --ancestry-path GOOD..BAD`, not `git bisect run`:
it leaves no BISECT state in the user's repository, caches each verdict (keyed by gate, commit,
GOOD and a fingerprint of the judge) under <git dir>/xtrain-bisect/, and skips untestable commits by
its own rule. A commit whose stages fail, or whose gate is error, skip or inconclusive, is
untestable: skipped like `git bisect skip`, printed, and named among the candidates if it is next to
the boundary. Exit 0 first bad commit found, 1 the gate passes at BAD, 2 error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from contracts import outputs
from contracts.fileio import atomic_write_json
from contracts.validate import ValidationError
from contracts.yamlfile import PIPELINE_BYTES, load_pipeline_text
from gates.campaigns import children
from gates.judges import catalogue
from params.config import write_with_section
from params.project import load_judging
from registry import index as registry_index
from registry.store import Registry, RegistryError


class BisectError(RuntimeError):
    pass


def _earlier_cache(path: Path) -> bool:
    """A cache bisect wrote before markers: verdict files and its worktrees folder, nothing else."""
    return all(p.name == "worktrees" or VERDICT_FILE.fullmatch(p.name) for p in path.iterdir())


VERDICT_FILE = re.compile(r"[0-9a-f]{24}\.json")
CACHE = outputs.Kind("bisect cache", folder=True, marker=True, recognise=_earlier_cache)


@dataclass(frozen=True)
class Verdict:
    status: str  # pass | fail | untestable
    message: str
    config: str | None = None  # the config_hash the commit's runs recorded (None: no run read)
    golden: bool = False  # GOOD's registry holds a golden for that config (any environment)


def stages_for(gate: str | None) -> list[str]:
    """DVC targets for a gate; [] means the whole pipeline (every gate)."""
    try:
        return catalogue.stages_for(gate)
    except KeyError as e:
        raise BisectError(e.args[0]) from None


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BisectError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> tuple[str, list[str]]:
    """(GOOD's sha, the commits after GOOD up to BAD, oldest first)."""
    good_sha = git(repo, "rev-parse", "--verify", f"{good}^{{commit}}")
    bad_sha = git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good_sha, bad_sha]).returncode:
        raise BisectError(f"GOOD {good} is not an ancestor of BAD {bad}")
    commits = git(repo, "rev-list", "--ancestry-path", "--reverse", f"{good_sha}..{bad_sha}").split()
    if not commits:
        raise BisectError(f"no commits between GOOD {good} and BAD {bad}")
    return good_sha, commits


def judge_thresholds(params: Path) -> dict:
    """The judge's `gates:` section: the only part of its params.yaml that judges other commits (read
    and validated by the one loader, params/project.py)."""
    try:
        return load_judging(params).thresholds
    except ValidationError as e:
        raise BisectError(f"the judge's thresholds: {e}") from None


def judge_fingerprint(judge: Path, params: Path) -> str:
    """What the verdict depends on besides the commit: the gate code, contracts (schemas) and thresholds."""
    h = hashlib.sha256()
    code = [
        f for pkg in ("gates", "contracts") for f in (judge / pkg).rglob("*") if f.suffix in (".py", ".json")
    ]
    for path in sorted(code):
        h.update(str(path.relative_to(judge)).encode())
        h.update(path.read_bytes())
    h.update(json.dumps(judge_thresholds(params), sort_keys=True).encode())
    return h.hexdigest()[:16]


def judged_params(tree: Path, thresholds: dict) -> Path:
    """The commit's own params.yaml with the judge's `gates:` section: what its runs are judged against
    (read by the one loader, written by the one writer, params/config.py)."""
    out = tree / "reports" / "bisect-params.yaml"
    write_with_section(tree / "params.yaml", out, "gates", thresholds)
    return out


def run_config(tree: Path) -> str | None:
    """The config identity the commit's runs recorded (single first; the gate's stages made them)."""
    for launcher in ("single", "thread", "proc"):
        path = tree / "runs" / launcher / "metrics.json"
        try:
            return str(json.loads(path.read_text())["config_hash"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def has_golden(registry: Path, config: str | None) -> bool:
    """GOOD's registry holds a golden of this config for some environment."""
    if config is None:
        return False
    try:
        reg = Registry(registry)
        return any(e.data["config_hash"] == config for env in reg.env_ids() for e in reg.goldens(env))
    except RegistryError:
        return False


def stage_inputs(pipeline: object) -> list[str] | None:
    """Every path a stage of a parsed dvc.yaml depends on, with each params file it names other than
    params.yaml; None when they cannot all be read literally (a `${...}` dep, a dep that is not a path)."""
    stages = pipeline.get("stages") if isinstance(pipeline, dict) else None
    if not isinstance(stages, dict):
        return None
    paths: list[str] = []
    for body in stages.values():
        body = body.get("do", body) if isinstance(body, dict) else None
        if not isinstance(body, dict):
            return None
        deps = body.get("deps") or []
        files = [next(iter(p)) for p in body.get("params") or [] if isinstance(p, dict) and p]
        if not isinstance(deps, list) or not all(isinstance(d, str) and "${" not in d for d in deps + files):
            return None
        paths += deps + files
    return paths


def pipeline_inputs(repo: Path, commit: str) -> list[list[str]] | None:
    """What `commit` feeds the pipeline, as git blob ids: dvc.yaml, params.yaml, every `.dvc` file and
    every tracked file under a stage's dep. Two commits with equal inputs build equal artifacts (DVC's
    own rule: code, params, data), so one verdict serves both. None: always build this commit."""
    try:
        if int(git(repo, "cat-file", "-s", f"{commit}:dvc.yaml")) > PIPELINE_BYTES:
            return None
        source = f"{commit}:dvc.yaml"
        # pragma below: the source only names an error this function turns into None
        pipeline = load_pipeline_text(git(repo, "show", source), source)  # pragma: no mutate -- equivalent
    except (BisectError, ValidationError, ValueError):
        return None
    deps = stage_inputs(pipeline)
    if deps is None:
        return None
    roots = [d.removesuffix("/") for d in deps]
    listing = [line.split("\t", 1) for line in git(repo, "ls-tree", "-r", "-z", commit).split("\0") if line]
    return [
        [path, meta.split()[2]]
        for meta, path in listing
        if path in ("dvc.yaml", "params.yaml") or path.endswith(".dvc")
        or any(path == r or path.startswith(r + "/") for r in roots)
    ]  # fmt: skip


def run_logged(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cmd` in a process group of its own, ended with bisect on a signal (gates/campaigns/children.py)."""
    done = children.run(cmd, cwd, {**os.environ, "DVC_NO_ANALYTICS": "1"})
    return subprocess.CompletedProcess(cmd, done.code, done.out, done.err)


def tail(text: str, n: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


@dataclass
class Bisector:
    repo: Path  # the repository with the commits
    judge: Path  # the checkout whose gate code and params.yaml `gates:` judge every commit
    params: Path
    gate: str | None
    good: str
    cache: Path

    @cached_property
    def fingerprint(self) -> str:
        """The judge's fingerprint, read once: the judge's files do not change while it bisects."""
        return judge_fingerprint(self.judge, self.params)

    def key(self, commit: str) -> str:
        # v2: each commit judged against its own params (the judge gives only `gates:`)
        text = f"v2|{self.gate}|{commit}|{self.good}|{self.fingerprint}"
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def inputs_key(self, commit: str) -> str | None:
        """The key of what `commit` feeds the pipeline (pipeline_inputs), judged by this judge from GOOD."""
        inputs = pipeline_inputs(self.repo, commit)
        if inputs is None:
            return None
        text = json.dumps(["v1", self.gate, self.good, self.fingerprint, inputs])
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def verdict(self, commit: str) -> Verdict:
        """The gate's verdict at `commit`: from the cache, else that of an earlier commit with the same
        pipeline inputs (a docs commit is judged once, as its parent), else by running its stages."""
        path = self.cache / f"{self.key(commit)}.json"
        if path.exists():
            return Verdict(**json.loads(path.read_text()))
        inputs = self.inputs_key(commit)
        same = self.cache / "inputs" / f"{inputs}.json"
        if inputs is not None and same.exists():
            seen = json.loads(same.read_text())
            v = Verdict(**{**seen["verdict"], "message": f"(as {seen['commit'][:12]}: same pipeline inputs) "
                           + seen["verdict"]["message"]})  # fmt: skip
            atomic_write_json(path, asdict(v))
            return v
        v = self.build(commit)
        if inputs is not None:
            atomic_write_json(same, {"commit": commit, "verdict": asdict(v)})
        atomic_write_json(path, asdict(v))  # a killed bisect leaves no half-written verdict to read
        return v

    def build(self, commit: str) -> Verdict:
        """The verdict of `commit`'s own artifacts, built in a scratch worktree that is removed after."""
        tree = self.cache / "worktrees" / commit[:12]
        shutil.rmtree(tree, ignore_errors=True)
        git(self.repo, "worktree", "prune")  # worktrees a killed bisect left registered
        git(
            self.repo,
            "worktree",
            "add",
            "--detach",  # pragma: no mutate -- equivalent: `commit` is a sha (rev-list), never a branch
            "--force",  # pragma: no mutate -- equivalent: after the prune above no stale registration is left
            str(tree),
            commit,
        )
        try:
            v = self.build_and_judge(tree)
        finally:
            subprocess.run(
                ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(tree)], capture_output=True
            )
            shutil.rmtree(tree, ignore_errors=True)
        return v

    def build_and_judge(self, tree: Path) -> Verdict:
        top = Path(git(self.repo, "rev-parse", "--path-format=absolute", "--git-common-dir")).parent
        run_logged(
            ["dvc", "config", "--local", "cache.dir", str(top / ".dvc" / "cache")], tree
        )  # shared cache
        built = run_logged(["dvc", "repro", *stages_for(self.gate)], tree)
        if built.returncode != 0:
            return Verdict("untestable", f"dvc repro failed: {tail(built.stderr or built.stdout)}")
        shutil.rmtree(tree / "registry")
        git(tree, "checkout", self.good, "--", "registry")  # GOOD's registry: later blessings cannot hide it
        if not (tree / "registry" / registry_index.INDEX).exists():  # GOOD predates registry/index.json:
            registry_index.create(tree / "registry")  # its committed files are the truth
        config = run_config(tree)
        v = self.judge_tree(tree)
        return Verdict(v.status, v.message, config, has_golden(tree / "registry", config))

    def judge_tree(self, tree: Path) -> Verdict:
        """The judge's gate code and thresholds over the commit's artifacts and its own params."""
        report = tree / "reports" / "bisect-gates.json"
        only = ["--only", self.gate] if self.gate else []
        try:
            params = judged_params(tree, judge_thresholds(self.params))
        except ValidationError as e:  # a commit whose params.yaml this loader refuses cannot be judged
            return Verdict("untestable", str(e))
        cmd = [sys.executable, "-m", "gates", "--root", str(tree), "--params", str(params)]
        judged = run_logged([*cmd, "check", *only, "--report", str(report)], self.judge)
        if not report.exists():
            return Verdict("untestable", f"gates check exited {judged.returncode}: {tail(judged.stderr)}")
        gates = json.loads(report.read_text())["gates"]
        failing = [g for g in gates if g["status"] in ("fail", "inconclusive", "error")]
        hard = [g for g in failing if g["status"] == "fail"]
        if hard:
            return Verdict("fail", "; ".join(f"{g['id']}: {g['message']}" for g in hard))
        if failing or not gates or any(g["status"] == "skip" for g in gates):  # inconclusive is never "bad"
            odd = [g for g in gates if g["status"] != "pass"]
            said = "; ".join(f"{g['id']} {g['status']}: {g['message']}" for g in odd)
            return Verdict("untestable", said or "nothing judged: the report lists no gate")
        return Verdict("pass", "; ".join(f"{g['id']}: {g['message']}" for g in gates))


Say = Callable[[str, Verdict, str], None]


def search(b: Bisector, commits: list[str], say: Say) -> tuple[int, int, list[int]]:
    """Binary search; returns (index of the last passing commit (-1: GOOD), index of the first bad
    commit, indices of skipped commits between them)."""
    lo, hi, skipped = -1, len(commits) - 1, set()
    while True:
        window = range(lo + 1, hi)  # lo and hi were judged, so never skipped
        pool = [i for i in window if i not in skipped]
        if not pool:
            return lo, hi, sorted(skipped.intersection(window))
        mid = (lo + hi) // 2
        pick = min(pool, key=lambda i: (abs(i - mid), i))
        v = b.verdict(commits[pick])
        say(commits[pick], v, f"{len(pool)} left")
        if v.status == "untestable":
            skipped.add(pick)
        elif v.status == "fail":
            hi = pick
        else:
            lo = pick


def subject(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%h %s", commit)


def bisect(
    repo: Path, judge: Path, params: Path, good: str, bad: str, gate: str | None, cache: Path | None
) -> int:
    common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    cache = outputs.check(cache or common / "xtrain-bisect", CACHE)  # ours, or nothing there yet
    stages_for(gate)  # an unknown gate is an error before any work
    good_sha, commits = commit_range(repo, good, bad)
    cache.mkdir(parents=True, exist_ok=True)
    outputs.write_marker(cache, CACHE)
    b = Bisector(repo, judge, params, gate, good_sha, cache)
    what = gate or "every gate"
    print(
        f"bisect {what} over {len(commits)} commits after {subject(repo, good_sha)}; judged by the gates "
        f"and thresholds of {judge}, against GOOD's registry"
    )

    def say(commit: str, v: Verdict, note: str) -> None:
        word = "skip (untestable)" if v.status == "untestable" else v.status
        print(f"  {subject(repo, commit)}: {word} [{note}]: {v.message[:300]}")

    top = b.verdict(commits[-1])
    say(commits[-1], top, "BAD")
    if top.status == "pass":
        print(f"{what} passes at BAD {bad}: no failing commit")
        return 1
    if top.status == "untestable":
        raise BisectError(f"BAD {bad} cannot be judged: {top.message}")
    base = b.verdict(good_sha)
    say(good_sha, base, "GOOD")
    if base.status != "pass":
        raise BisectError(f"GOOD {good} does not pass ({base.status}): {base.message}")
    last, first, skipped = search(b, commits, say)
    if skipped:
        names = ", ".join(subject(repo, commits[i]) for i in skipped)
        print(f"untestable commits next to the boundary: the first bad commit could also be any of: {names}")
    print(f"first bad commit: {subject(repo, commits[first])} ({commits[first]})")
    bad_v = b.verdict(commits[first])
    changed = config_change(b.verdict(commits[last] if last >= 0 else good_sha), bad_v)
    if changed and reads_goldens(gate):
        short = git(repo, "log", "-1", "--format=%h", commits[first])
        print(f"  config changed at {short}, no golden: bless it or revert ({changed})")
    print(f"  {bad_v.message}")
    return 0


def reads_goldens(gate: str | None) -> bool:
    """Gates judged against a golden of the run's config (a new config needs a new golden)."""
    return gate is None or "fresh_train".startswith(gate) or gate.startswith("fresh_train")


def config_change(good: Verdict, bad: Verdict) -> str | None:
    """How the config identity moved between the last passing and the first failing commit, when
    GOOD's registry has no golden for the new one; None if it did not move (or a golden exists)."""
    if good.config is None or bad.config is None or good.config == bad.config or bad.golden:
        return None
    return f"config_hash {good.config} -> {bad.config}"
