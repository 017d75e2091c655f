"""A real artifact tree for the gate tests, built by the real code on the tiny config.

single, thread and torchrun runs, both exports, a scratch registry with a blessed version and a
golden, the closed loop and the scaling benchmark; params.yaml is the repository's with the tiny
config written into it, so the gates check the runs against the params that produced them.
`lock_with_dvc` records the tree in dvc.lock with real DVC (`dvc commit`), for the stale tests.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO, TINY_OVERRIDES, TinyData, tiny_cli, tiny_spec, tiny_text
from contracts.fileio import atomic_write_json
from gates.__main__ import main as gates_main
from registry.__main__ import main as registry_main
from xtrain.checkpoint_dir import resolve_checkpoint
from xtrain.closed_loop_run import closed_loop
from xtrain.config import set_in_file
from xtrain.export import export
from xtrain.launch import run_single, run_threads, torchrun_cmd

# one round: the tree is about the gates; re-measuring is tests/test_measure_remeasure.py
SCALING_OVERRIDES = (
    "scaling.warmup_steps=1",
    "scaling.window_steps=2",
    "scaling.windows=2",
    "scaling.max_rounds=1",
)


def write_params(root: Path) -> None:
    shutil.copyfile(REPO / "params.yaml", root / "params.yaml")
    set_in_file(root / "params.yaml", [*TINY_OVERRIDES, *SCALING_OVERRIDES, "export.pinned_model=tiny"])
    params = yaml.safe_load((root / "params.yaml").read_text())
    # tiny model, two-step windows: timing is noise, so the bounds are wide (tests narrow them)
    params["gates"]["scaling"]["cpu"] = {"floors": {"2": 0.05}, "band": 0.95, "max_spread": 100.0}
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def registry(root: Path, *args: str) -> None:
    assert registry_main(["--root", str(root / "registry"), *args]) == 0


def build_tree(tiny_data: TinyData, root: Path) -> Path:
    write_params(root)
    run_single(tiny_spec(tiny_data, run_dir=root / "runs" / "single", train={"cpu_threads": 2}))
    run_threads(
        tiny_spec(tiny_data, launcher="thread", run_dir=root / "runs" / "thread", train={"cpu_threads": 2}),
        2,
        30,
    )
    run_cli(torchrun_cmd(2, "pipeline.train", "proc", *tiny_cli(tiny_data, root / "runs" / "proc")))
    registry(
        root, "pin", str(root / "runs" / "single"), "--model", "tiny", "--reason", "pinned for the gate tests"
    )
    export(root / "registry" / "pinned" / "tiny", root / "exports" / "pinned", "fp32")
    export(root / "runs" / "single", root / "exports" / "fresh", "fp32")
    params = ["--params", str(root / "params.yaml")]
    registry(
        root,
        *params,
        "bless",
        "--model",
        "tiny",
        "--export",
        str(root / "exports" / "pinned"),
        "--reason",
        "blessed for the gate tests",
    )
    bless_golden(root, root / "runs" / "single" / "metrics.json")
    report = closed_loop(
        root / "exports" / "fresh",
        resolve_checkpoint(root / "runs" / "single"),
        tiny_text(3000, seed=5),
        2,
        8,
        8,
        {"fp32": 1e-4, "bf16": 1e-2},
    )
    atomic_write_json(root / "reports" / "closed_loop.json", report)
    # one intra-op thread per rank: two on this 2-core box's loaded cores collapse the world-1 proc
    # run (350 vs 17,347 tok/s once), and the check judges the gate, not the box's load
    scaling = (*TINY_OVERRIDES, *SCALING_OVERRIDES, "train.cpu_threads=1")
    sets = [a for o in scaling for a in ("--set", o)]
    files = ["--tokens", str(tiny_data.tokens), "--tokenizer", str(tiny_data.tokenizer)]
    params_file = str(REPO / "params.yaml")
    run_cli(
        [
            sys.executable,
            "-m",
            "pipeline.scaling",
            "--params",
            params_file,
            *sets,
            *files,
            "--out",
            str(root / "bench"),
            "--profile",
            "2",
        ]
    )
    return root


def bless_golden(root: Path, metrics: Path, *extra: str) -> None:
    registry(
        root, "bless", "--golden", "--metrics", str(metrics), "--export", str(root / "exports" / "fresh"),
        "--reason", "golden for the gate tests", *extra,
    )  # fmt: skip


def bless_golden_as(root: Path, env_id: str) -> None:
    """The run's golden, blessed by the real bless code as if it came from environment `env_id`."""
    m = json.loads((root / "runs" / "single" / "metrics.json").read_text())
    m["env"]["env_id"] = env_id
    other = root / "other-env-metrics.json"
    other.write_text(json.dumps(m))
    bless_golden(root, other)
    other.unlink()


def run_cli(cmd: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-2000:]


DVC_YAML = {
    "stages": {
        "train_single": {"cmd": "true", "outs": ["runs/single/metrics.json"]},
        "train": {
            "foreach": ["thread", "proc"],
            "do": {"cmd": "true", "outs": ["runs/${item}/metrics.json"]},
        },
        "export": {"cmd": "true", "outs": ["exports/fresh", "exports/pinned"]},
        "closed_loop": {"cmd": "true", "outs": ["reports/closed_loop.json"]},
        "scaling": {"cmd": "true", "outs": ["bench/scaling.json"]},
    }
}


def lock_with_dvc(root: Path) -> None:
    """Record the tree's artifacts in dvc.lock (and the DVC cache) with real DVC."""
    (root / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML))
    env = {"DVC_NO_ANALYTICS": "1"}
    for cmd in (["init", "--no-scm", "-q"], ["config", "core.analytics", "false"], ["commit", "-f", "-q"]):
        proc = subprocess.run(
            [sys.executable, "-m", "dvc", *cmd],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]


def copy_tree(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def check(root: Path, *extra: str) -> tuple[int, dict]:
    code = gates_main(["--root", str(root), "check", *extra])
    return code, json.loads((root / "reports" / "gates.json").read_text())


def gate(report: dict, gid: str) -> dict:
    return next(g for g in report["gates"] if g["id"] == gid)


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    os.chmod(path, 0o644)
    path.write_text(json.dumps(data))


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def golden_path(root: Path) -> Path:
    return next((root / "registry" / "goldens").glob("*/v1.json"))


NAN = math.nan
