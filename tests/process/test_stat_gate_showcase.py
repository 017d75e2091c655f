"""The statistical tier through the real `python -m gates check` (gate loss_match_stat.proc): the
showcase trainer (examples/nanogpt/train.py as recorded) with dropout 0.1 inside SDPA, 3 single-device
replicas (dvc.yaml `train_replica@0..2` writing runs/single-r<k>) and a torchrun run with 2 ranks (gloo),
in a scratch DVC project built by the real `dvc repro`.

The tier's lines are the campaign's (examples/nanogpt/stat_showcase.py STAT: `dropout='replicas'`,
`rec.reseed(REPLICA)`), plus the replica's run folder; the vendored train.py is not edited. Correct code
must PASS naming the tier; the negative control, rank 1 not dividing its loss by the accumulation
(examples/nanogpt/mistakes.py accum_undivided_rank1), must FAIL from the statistical gate.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_nanogpt_showcase import EXAMPLE, M, judge, run, scratch_project

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

sys.path.insert(0, str(EXAMPLE))
import stat_showcase  # noqa: E402  (the campaign's lines for the tier)

GATE = "loss_match_stat.proc"
RUN_DIR = "run_dir='runs/proc' if ddp else 'runs/single')"
REPLICA_DIR = "run_dir='runs/proc' if ddp else 'runs/single-r' + os.environ['REPLICA'])"
ARGS = "train.py config/showcase_cpu.py --dropout=0.1"
TORCHRUN = "python3 -m torch.distributed.run --standalone --nproc-per-node 2"
PROC = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *ARGS.split()]


def source(mistake: M.Mistake | None = None) -> str:
    """train.py with the tier's two lines (and the mistake), each replica in runs/single-r<k>."""
    text = M.patched(mistake) if mistake else M.TRAIN.read_text()
    return M.patched(M.Mistake("stat", (*stat_showcase.STAT[:2], (RUN_DIR, REPLICA_DIR)), None, ""), text)


def pipeline(root: Path) -> None:
    """dvc.yaml: prepare, K=3 replicas of single, the DDP run; params.yaml's scope names them."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    deps = stages["train_single"]["deps"]
    stages = {
        "prepare": stages["prepare"],
        "train_replica": {
            "foreach": [0, 1, 2],
            "do": {
                "cmd": f"REPLICA=${{item}} python3 {ARGS}",
                "deps": deps,
                "outs": ["runs/single-r${item}"],
            },
        },
        "train": {
            "foreach": ["proc"],
            "do": {"cmd": f"REPLICA=0 {TORCHRUN} {ARGS}", "deps": deps, "outs": ["runs/proc"]},
        },
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["gates"]["scope"]["stages"] = ["prepare", *[f"train_replica@{k}" for k in range(3)], "train@proc"]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["git", "add", "-A"], [*git, "commit", "-qm", "the statistical tier's replicas"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = scratch_project(tmp_path_factory.mktemp("nanogpt-stat"))
    (root / "train.py").write_text(source())
    pipeline(root)  # commits train.py too
    return root


def test_replicas_and_ddp_with_dropout_pass_naming_the_tier_and_a_mistake_fails(project: Path) -> None:
    log: list[str] = []
    assert run(["dvc", "repro"], project, log) == 0, "\n".join(log)[-3000:]
    correct = judge("correct", project, log)
    assert correct.gate("seals")["status"] == "pass", correct.gate("seals")["message"]
    entry = correct.gate(GATE)
    print(f"{GATE} {entry['status'].upper()} {entry['message']}")
    assert entry["status"] == "pass", entry["message"]
    assert entry["message"].startswith("statistical tier (K=3, alpha 0.01"), entry["message"]
    # negative control: rank 1 does not divide its loss by the accumulation (DDP side only)
    mistake = next(m for m in M.MISTAKES if m.name == "accum_undivided_rank1")
    (project / "train.py").write_text(source(mistake))
    env_run = ["env", "REPLICA=0", sys.executable, *PROC]
    assert run(env_run, project, log) == 0, "\n".join(log)[-3000:]
    assert run(["dvc", "commit", "-f", "-q"], project, log) == 0
    wrong = judge("accum_undivided_rank1", project, log)
    bad = wrong.gate(GATE)
    print(f"{GATE} {bad['status'].upper()} {bad['message']}")
    assert bad["status"] == "fail", bad["message"]
    assert (
        bad["message"].startswith("statistical tier (K=3")
        and "outside the replicas' spread" in bad["message"]
    )
    assert wrong.exit_code == 1  # a FAIL is exit 1
