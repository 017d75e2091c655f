"""nanoGPT gated as a stranger would (issue #54 item 6): examples/nanogpt, single process vs torchrun
(2 ranks, gloo) on CPU, judged by the real `python -m gates check` in a scratch copy of the example.

The example as the docs make it comparable (its recording lines, nanoGPT's `config` dict as it is,
its own accumulation arithmetic: gradient_accumulation_steps 4 on one device, 2 per rank at world 2,
and its rank-0-only evals; out_dir 'out-single' vs 'out-proc') must PASS; each mistake of
examples/nanogpt/mistakes.py, planted in a copy of train.py, must FAIL the gate it names with its
phrase; each control must PASS; nanoGPT left as it is (each rank draws its own batches) must FAIL
naming different samples, not a config difference. No output of any scenario (stdout and stderr of
every command, gates.json) may hold an internal shorthand or a path of this repository.

One scratch DVC project serves every scenario: the correct code by the real `dvc repro` (prepare,
train_single, train@proc); then each scenario's train.py is written in, the run it changes is
re-made with the stage's own command (a mistake acts under DDP only, so runs/single stays the
correct code's), `dvc commit -f` records the tree and `gates check` judges it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conftest import REPO, code_first
from contracts.plain_words import internal_words
from gates.reading.scope import Sources

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

EXAMPLE = REPO / "examples" / "nanogpt"
COPIED = (
    "train.py",
    "model.py",
    "configurator.py",
    "prepare.py",
    "LICENSE",
    "config",
    "params.yaml",
    ".dvc/config",
    ".dvc/.gitignore",
    ".dvcignore",
    ".gitignore",
)
SINGLE = [sys.executable, "train.py", "config/showcase_cpu.py", "--out_dir=out-single"]
PROC = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
PROC += ["train.py", "config/showcase_cpu.py", "--out_dir=out-proc"]


def _mistakes():
    spec = importlib.util.spec_from_file_location("nanogpt_mistakes", EXAMPLE / "mistakes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


M = _mistakes()


@dataclass
class Scenario:
    name: str
    exit_code: int | None  # gates check's; None when a run failed before it
    output: str  # stdout and stderr of every command, gates.json's text
    gates: dict[str, dict]  # gate id -> its entry in gates.json

    def gate(self, gid: str) -> dict:
        assert gid in self.gates, (
            f"{self.name}: no {gid} in the report; the runs failed:\n{self.output[-3000:]}"
        )
        return self.gates[gid]


def run(cmd: list[str], cwd: Path, log: list[str]) -> int:
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    log += [
        f"$ {' '.join(cmd[1:] if cmd[0] == sys.executable else cmd)} (exit {proc.returncode})",
        proc.stdout,
        proc.stderr,
    ]
    return proc.returncode


def scratch_project(root: Path) -> Path:
    """The example as a user copies it out: its files, dvc.yaml without the harness's deps."""
    for name in COPIED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        src = EXAMPLE / name
        shutil.copytree(src, root / name) if src.is_dir() else shutil.copy2(src, root / name)
    lines = (EXAMPLE / "dvc.yaml").read_text().splitlines(keepends=True)
    (root / "dvc.yaml").write_text("".join(line for line in lines if "- ../../" not in line))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "nanoGPT, gated"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return root


def judge(name: str, root: Path, log: list[str]) -> Scenario:
    (root / "reports" / "gates.json").unlink(missing_ok=True)
    code = run([sys.executable, "-m", "gates", "check"], root, log)
    report = root / "reports" / "gates.json"
    text = report.read_text() if report.is_file() else ""
    gates = {g["id"]: g for g in json.loads(text)["gates"]} if text else {}
    print(f"{name}: gates check exit {code}: " + "; ".join(f"{g} {e['status']}" for g, e in gates.items()))
    return Scenario(name, code, "\n".join([*log, text]), gates)


def scenario(name: str, root: Path, text: str, single: bool) -> Scenario:
    (root / "train.py").write_text(text)
    log: list[str] = []
    made = (not single or run(SINGLE, root, log) == 0) and run(PROC, root, log) == 0
    if not made:
        return Scenario(name, None, "\n".join(log), {})
    run(["dvc", "commit", "-f", "-q"], root, log)
    return judge(name, root, log)


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scenario]:
    root = scratch_project(tmp_path_factory.mktemp("nanogpt"))
    log: list[str] = []
    out = {}
    if run(["dvc", "repro"], root, log) == 0:
        out["correct"] = judge("correct", root, log)
    else:
        out["correct"] = Scenario("correct", None, "\n".join(log), {})
    tested = [*M.MISTAKES, M.CONTROLS[0]]  # the other controls: in the catalogue, run by its users
    for m in tested:
        out[m.name] = scenario(m.name, root, M.patched(m), single=False)
    out["as_is"] = scenario("as_is", root, M.patched(M.AS_IS), single=True)
    return out


# ---- without runs: the catalogue and the edits -----------------------------------------------------


def test_every_patch_applies_once_and_as_is_is_upstreams_get_batch() -> None:
    for m in [*M.CATALOGUE, M.AS_IS]:
        assert M.patched(m) != M.TRAIN.read_text(), m.name
    as_is = M.patched(M.AS_IS)
    assert "same-batches" not in as_is and "eval_gen" not in as_is
    assert "    ix = torch.randint(len(data) - block_size, (batch_size,))\n" in as_is
    assert as_is.count("X, Y = get_batch('train')") == 2
    with pytest.raises(M.PatchError, match="occurs 0 times"):  # a moved anchor is refused, not skipped
        M.patched(M.MISTAKES[0], M.TRAIN.read_text().replace(M.SYNC, "# gone"))


def test_the_recording_takes_ten_lines_and_every_edit_is_marked() -> None:
    text = (EXAMPLE / "train.py").read_text()
    assert text.count("# runrecord") == 10
    vendored = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "examples/nanogpt/train.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.split()
    if not vendored:
        pytest.skip("no git history of the vendored train.py in this checkout")
    upstream = subprocess.run(
        ["git", "show", f"{vendored[-1]}:examples/nanogpt/train.py"], cwd=REPO, capture_output=True, text=True
    ).stdout
    marks = ("# runrecord", "# showcase port", "# showcase same-batches", "seed_offset: the rank")
    added = [line for line in text.splitlines() if line not in upstream.splitlines()]
    unmarked = [line for line in added if not any(k in line for k in marks)]
    # the lines inside a marked if/else (the port's two moved lines, the same-batches draws)
    assert sorted(unmarked) == sorted(
        [
            "        device = f'cuda:{ddp_local_rank}'",
            "        torch.cuda.set_device(device)",
            "        ix = torch.randint(len(data) - block_size, (batch_size,), generator=eval_gen)",
            "        step, micro = divmod(fetch, gradient_accumulation_steps)",
            "        ix = torch.randint(len(data) - block_size, (ddp_world_size * gradient_accumulation_steps * "
            "batch_size,), generator=torch.Generator().manual_seed(1337 + step))",
            "X, Y = get_batch('train', 0) # fetch the very first batch",
            "        X, Y = get_batch('train', iter_num * gradient_accumulation_steps + micro_step + 1)",
        ]
    ), unmarked


def test_the_examples_dvc_yaml_lists_every_file_its_commands_import() -> None:
    # the harness's files too (../../): gates check refuses the example's verdict when one is missing
    # (seals: "dvc.yaml lacks deps its command imports"), as after runrecord gained a module
    stages = yaml.safe_load((EXAMPLE / "dvc.yaml").read_text())["stages"]
    sources = Sources(EXAMPLE)
    for name, stage in [("train_single", stages["train_single"]), ("train@proc", stages["train"]["do"])]:
        cmd = stage["cmd"].replace("${item}", "proc")
        missing = sorted(set(sources.required(cmd)) - set(stage["deps"]))
        assert missing == [], f"{name}: add to examples/nanogpt/dvc.yaml: {missing}"
    stage = stages["train_single"]
    planted = Sources(EXAMPLE).required(stage["cmd"])  # the negative control: one dep left out is named
    assert set(planted) - set(stage["deps"][:-1]) == {stage["deps"][-1]}


def test_the_leak_check_finds_the_shorthand_and_paths_and_spares_the_users_own() -> None:
    # the negative control of the message check: the leaks issue #54 quotes, then a user's own words
    for bad, found in [
        ("dropout would be silently off: the seed's T21", ["the seed's", "T21"]),
        ("xtrain/core/train.py evaluate restores it", ["xtrain/core/train.py"]),
        ("Next: see docs/ddp-gate.md", ["docs/ddp-gate.md"]),
        ("every value checked where it arrives (issue #36 item 5)", ["#36"]),
        (
            "validated against contracts/schemas/thresholds.schema.json",
            ["contracts/schemas/thresholds.schema.json"],
        ),
        ("spreads are too large to judge (docs/perf-gates.md)", ["docs/perf-gates.md"]),
    ]:
        assert internal_words(bad) == found, bad
    for good in [
        "runs/proc/metrics.json cross_rank.per_rank names the rank",
        "python -m gates explain loss_match.proc",
        "no perf baseline (registry/baselines/cpu-x86-64-torch2.13.0+cpu-t2/)",
        "found vocab_size = 86 (inside data/showcase_char/meta.pkl)",
        "python3 train.py config/showcase_cpu.py --out_dir=out-single",
        "tokens per iteration will be: 512",
    ]:
        assert internal_words(good) == [], good


# ---- the scenarios ----------------------------------------------------------------------------------


def test_the_comparable_showcase_passes(scenarios: dict[str, Scenario]) -> None:
    s = scenarios["correct"]
    assert s.exit_code == 0, s.output[-3000:]
    lm, cr = s.gate("loss_match.proc"), s.gate("cross_rank.proc")
    assert lm["status"] == "pass" and "16 steps consumed exactly the single rows" in lm["message"], lm
    assert cr["status"] == "pass", cr


@pytest.mark.parametrize("mistake", [pytest.param(m, id=m.name) for m in M.MISTAKES])
def test_each_planted_mistake_fails_with_its_diagnosis(scenarios: dict[str, Scenario], mistake) -> None:
    s = scenarios[mistake.name]
    entry = s.gate(mistake.gate)
    assert entry["status"] == "fail" and mistake.phrase in entry["message"], entry
    assert s.exit_code == 1
    assert "trained different configurations" not in entry["message"]


def test_a_harmless_change_on_one_side_passes(scenarios: dict[str, Scenario]) -> None:
    control = M.CONTROLS[0]  # log_interval 2 on the torchrun side: a config key that changes no number
    s = scenarios[control.name]
    assert s.exit_code == 0, s.output[-3000:]
    assert (
        s.gate("loss_match.proc")["status"] == "pass"
        and control.phrase in s.gate("loss_match.proc")["message"]
    )


def test_nanogpt_as_it_is_fails_naming_different_samples_not_a_config(scenarios: dict[str, Scenario]) -> None:
    entry = scenarios["as_is"].gate("loss_match.proc")
    assert entry["status"] == "fail" and "samples differ" in entry["message"], entry
    assert "different configurations" not in entry["message"]


def test_no_output_holds_an_internal_shorthand_or_a_path_of_this_repository(
    scenarios: dict[str, Scenario],
) -> None:
    assert all(s.gates for s in scenarios.values()), [n for n, s in scenarios.items() if not s.gates]
    found = {name: internal_words(s.output) for name, s in scenarios.items()}
    assert not any(found.values()), found
