"""A real artifact tree for the gate tests, built by the real code on the tiny config.

single, thread and torchrun runs, both exports, a scratch registry with a blessed version and a
golden, the closed loop and the scaling benchmark; params.yaml is the repository's with the tiny
config written into it, so the gates check the runs against the params that produced them.
The tree is sealed as dvc repro leaves one: dvc.yaml with the real pipeline's outs (metrics, plots,
checkpoints, data, reports) and a dvc.lock written by real DVC (`lock_with_dvc`, `dvc commit`).
A test that edits an artifact to exercise one gate's recomputation re-seals the tree first
(`check(root)` does, with `seal`): the attacker who rewrites dvc.lock consistently. Tests of the
seals themselves pass `sealed=False`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import PARAMS, REPO, TINY_OVERRIDES, TinyData, tiny_cli, tiny_spec, tiny_text
from contracts.checkpoint_dir import resolve_checkpoint
from contracts.fileio import atomic_write_json, md5_file
from gates.__main__ import main as gates_main
from params.config import set_in_file
from registry import index as registry_index
from registry.__main__ import main as registry_main
from xtrain.core.launch import run_single, run_threads
from xtrain.core.launch_plan import torchrun_cmd
from xtrain.export.closed_loop_run import closed_loop
from xtrain.export.hf_folder import export

# one round: the tree is about the gates; re-measuring is tests/process/test_measure_remeasure.py
SCALING_OVERRIDES = (
    "scaling.warmup_steps=1",
    "scaling.window_steps=2",
    "scaling.windows=2",
    "scaling.max_rounds=1",
)
# the pilot's every CPU cell on the tiny config (tests/process/test_pilot_gate.py breaks them)
PILOT_OVERRIDES = ("pilot.steps=6", "pilot.resume_at=3", "pilot.sets.cpu=[train.cpu_threads=1]")


def write_params(root: Path) -> None:
    shutil.copyfile(PARAMS, root / "params.yaml")
    set_in_file(
        root / "params.yaml",
        [*TINY_OVERRIDES, *SCALING_OVERRIDES, *PILOT_OVERRIDES, "export.pinned_model=tiny"],
    )
    params = yaml.safe_load((root / "params.yaml").read_text())
    # tiny model, two-step windows: timing is noise, so the bounds are wide (tests narrow them)
    params["gates"]["scaling"]["cpu"] = {"floors": {"2": 0.05}, "band": 0.95, "max_spread": 100.0}
    # the tree's dvc.yaml stands in for the pipeline (`cmd: true`, the real outs): it declares no scope
    # (gates/reading/scope.py), whose checks tests/process/test_scope.py exercises on real commands
    params["gates"].pop("scope", None)
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def registry(root: Path, *args: str) -> None:
    """The registry CLI on the tree's registry, reading the tree's params.yaml (never the cwd's)."""
    assert (
        registry_main(["--root", str(root / "registry"), "--params", str(root / "params.yaml"), *args]) == 0
    )


def copy_data(tiny_data: TinyData, root: Path) -> None:
    """The corpus, tokenizer and tokens the runs trained on, where the corpus and tokenizer stages put them."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    for src, name in ((tiny_data.text, "corpus.txt"), (tiny_data.tokenizer, "tokenizer.json"),
                      (tiny_data.tokens, "tokens.safetensors")):  # fmt: skip
        shutil.copyfile(src, root / "data" / name)


def build_tree(tiny_data: TinyData, root: Path) -> Path:
    write_params(root)
    copy_data(tiny_data, root)
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
    params_file = str(PARAMS)
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
    run_cli(
        [sys.executable, "-m", "pipeline.pilot", "--params", str(root / "params.yaml"), *files,
         "--out", str(root / "runs" / "pilot")]
    )  # fmt: skip
    run_cli([sys.executable, "-m", "pipeline.probes", *params, "--out", str(root / "runs" / "probes.json")])
    run_cli([sys.executable, "-m", "pipeline.env", *params, "--out", str(root / "runs" / "env.json")])
    verify = ["verify", str(root / "exports" / "pinned"), "--no-fail"]
    registry(root, *params, *verify, "--report", str(root / "reports" / "registry_check.json"))
    lock_with_dvc(root)
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


def unbless(root: Path, folder: Path) -> None:
    """A registry that never had `folder` (an environment's goldens or baselines): a bare deletion is
    an error naming the file (registry/index.json, issue #27), so index what is left, as a registry
    from before the blessing would have been."""
    shutil.rmtree(folder)
    (root / "registry" / "index.json").unlink()
    registry_index.create(root / "registry")


def run_cli(cmd: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-2000:]


def _train_stage(run: str, cached: bool = True) -> dict:
    """A training stage as dvc.yaml has it (train_single's outs uncached: never restored)."""

    def out(path: str) -> str | dict:
        return path if cached else {path: {"cache": False}}

    return {
        "cmd": "true",
        "deps": ["data/tokenizer.json", "data/tokens.safetensors", "runs/env.json"],
        "outs": [out(f"runs/{run}/checkpoints"), out(f"runs/{run}/metrics.json")],
        "metrics": [out(f"runs/{run}/summary.json")],
        "plots": [out(f"runs/{run}/loss.csv"), out(f"runs/{run}/eval.csv")],
    }


def out_path(out: str | dict) -> str:
    """A dvc.yaml out's path (`path` or `{path: {options}}`)."""
    return out if isinstance(out, str) else next(iter(out))


# the real dvc.yaml's stages and outs (commands are not run: the tree was built by the code above)
DVC_YAML = {
    "stages": {
        "corpus": {"cmd": "true", "outs": ["data/corpus.txt"]},
        "tokenizer": {
            "cmd": "true",
            "deps": ["data/corpus.txt"],
            "outs": ["data/tokenizer.json", "data/tokens.safetensors"],
        },
        "env": {"cmd": "true", "always_changed": True, "outs": [{"runs/env.json": {"cache": False}}]},
        "train_single": _train_stage("single", cached=False),
        "train": {"foreach": ["thread", "proc"], "do": _train_stage("${item}")},
        "export": {
            "cmd": "true",
            "deps": ["runs/single/checkpoints", "registry/pinned"],
            "outs": ["exports/fresh", "exports/pinned"],
        },
        "registry_check": {
            "cmd": "true",
            "deps": ["registry/models", "exports/pinned"],
            "outs": ["reports/registry_check.json"],
        },
        "closed_loop": {"cmd": "true", "deps": ["exports/fresh"], "outs": ["reports/closed_loop.json"]},
        "scaling": {
            "cmd": "true",
            "deps": ["data/tokens.safetensors"],
            "outs": ["bench/scaling.json", "bench/scaling.png"],
        },
        "pilot": {"cmd": "true", "deps": ["data/tokens.safetensors"], "outs": ["runs/pilot"]},
        "probes": {"cmd": "true", "deps": ["params.yaml"], "outs": ["runs/probes.json"]},
    }
}


def lock_with_dvc(root: Path, pipeline: dict | None = None) -> None:
    """Record the tree's artifacts in dvc.lock (and the DVC cache) with real DVC (`pipeline`: another
    dvc.yaml than DVC_YAML)."""
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline or DVC_YAML))
    env = {"DVC_NO_ANALYTICS": "1"}
    init = [] if (root / ".dvc").is_dir() else [["init", "--no-scm", "-q"]]  # a tree locked before: re-record
    for cmd in (*init, ["config", "core.analytics", "false"], ["commit", "-f", "-q"]):
        proc = subprocess.run(
            [sys.executable, "-m", "dvc", *cmd],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]


def write_pipeline(root: Path, stages: list[str]) -> None:
    """dvc.yaml with only these of DVC_YAML's stages (`train@thread`: one item of the foreach; their
    deps dropped: the tree's inputs may live elsewhere) and a dvc.lock sealing the tree as it is."""
    pipeline: dict[str, dict] = {}
    lock: dict[str, dict] = {}
    for name in stages:
        base, _, item = name.partition("@")
        body = {k: v for k, v in DVC_YAML["stages"][base].items() if k != "deps"}
        if item:
            do = {k: v for k, v in body["do"].items() if k != "deps"}
            pipeline.setdefault(base, {"foreach": [], "do": do})["foreach"].append(item)
            body = {
                k: [p.replace("${item}", item) for p in v] if isinstance(v, list) else v
                for k, v in do.items()
            }
        else:
            pipeline[name] = body
        paths = [out_path(p) for k in ("outs", "metrics", "plots") for p in body.get(k, [])]
        lock[name] = {"cmd": "true", "outs": [{"path": p, "hash": "md5"} for p in paths]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": pipeline}))
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": lock}))
    seal(root)


def _entry(root: Path, entry: dict) -> dict:
    """A dvc.lock out or dep entry recomputed from disk the way `dvc commit` writes it (a folder: the
    `.dir` hash of its listing, the listing stored in the cache so the seals can name a file)."""
    path = root / entry["path"]
    if path.is_file():
        return {**entry, "md5": md5_file(path), "size": path.stat().st_size}
    if not path.is_dir():
        return entry  # deleted: the tamper under test
    files = sorted(p for p in path.rglob("*") if p.is_file())
    listing = [{"md5": md5_file(p), "relpath": p.relative_to(path).as_posix()} for p in files]
    text = json.dumps(listing, sort_keys=True)
    md5 = hashlib.md5(text.encode()).hexdigest()
    obj = root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / (md5[2:] + ".dir")
    obj.parent.mkdir(parents=True, exist_ok=True)
    obj.write_text(text)
    size = sum(p.stat().st_size for p in files)
    return {**entry, "md5": md5 + ".dir", "size": size, "nfiles": len(files)}


def seal(root: Path) -> None:
    """Re-seal dvc.lock to the tree as it is now (as `dvc commit -f` would, without DVC's start-up):
    every out and dep entry gets its current md5 (tests/pipeline/test_seals.py holds the two equal)."""
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    for body in (lock.get("stages") or {}).values():
        for key in ("outs", "deps"):
            if body and body.get(key):
                body[key] = [_entry(root, e) for e in body[key]]
    (root / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))


def copy_tree(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def check(root: Path, *extra: str, sealed: bool = True) -> tuple[int, dict]:
    """The gates' verdict on the tree; `sealed`: re-seal dvc.lock first (the edit is judged by the
    gates' recomputation, not by the seals)."""
    if sealed and (root / "dvc.lock").exists():
        seal(root)
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
