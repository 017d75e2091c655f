"""`ci/lock.sh refresh`'s second half: re-check what the blessings depend on, in a fresh clone whose
environment is the new lock (run there, inside that virtualenv), and say which moved.

    python3 ci/lock_recheck.py       # exit 0: nothing re-checked moved; 1: a blessing moved; 2: error

Re-checked here (the real commands, nothing restored from a run cache: a fresh clone has none):
  - registry/models: the pinned checkpoint re-exported at every dtype the registry has blessed, against
    the latest version of that dtype (`python3 -m pipeline.export` + `python3 -m registry verify`);
  - this machine's CPU golden, if one exists: `dvc repro export`, then the gates fresh_train and
    export_md5 (exact tier: bitwise);
  - examples/hf-trainer: its md5 stage (`dvc repro md5` there: save_pretrained vs hf_registry).
Listed as not re-checked: every other environment's golden and every perf baseline (GPU ones need
their GPU; another CPU's golden needs that CPU; a baseline is a timing the perf gates judge in the
main job), and superseded registry versions (no gate reads them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

MOVED, SAME = "MOVED", "same"
SCRATCH = Path(tempfile.mkdtemp(prefix="xtrain-recheck-"))


def run(cmd: list[str], cwd: str = ".") -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def py(*args: str, cwd: str = ".") -> subprocess.CompletedProcess[str]:
    return run([sys.executable, *args], cwd)


def last_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit {out.returncode}"


def models() -> list[tuple[str, str, str]]:
    """(status, blessing, detail) for the latest registry version of each model and dtype."""
    rows = []
    for model in sorted(p.name for p in Path("registry/models").iterdir() if p.is_dir()):
        versions = sorted(Path("registry/models", model).glob("v*.json"), key=lambda p: int(p.stem[1:]))
        latest: dict[str, Path] = {}
        for v in versions:
            latest[json.loads(v.read_text())["dtype"]] = v
        for dtype, v in sorted(latest.items()):
            out_dir = str(SCRATCH / f"{model}-{dtype}")
            made = py("-m", "pipeline.export", f"registry/pinned/{model}", out_dir, "--dtype", dtype)
            verify = py("-m", "registry", "verify", out_dir) if made.returncode == 0 else made
            status = SAME if verify.returncode == 0 else MOVED
            rows.append((status, str(v), f"the pinned checkpoint's {dtype} export: {last_line(verify)}"))
        for v in versions:
            if v not in latest.values():
                rows.append(("-", str(v), "superseded: no gate reads it"))
    return rows


def golden() -> tuple[list[tuple[str, str, str]], str]:
    """This environment's golden, re-judged by the real gates; and this environment's id."""
    env = py("-m", "pipeline.env", "--out", str(SCRATCH / "env.json"))
    if env.returncode != 0:
        return [("ERROR", "runs/env.json", last_line(env))], ""
    env_id = json.loads((SCRATCH / "env.json").read_text())["single_env_id"]
    folder = Path("registry/goldens") / env_id
    if not folder.is_dir():
        return [("-", str(folder), "no golden of this environment to re-check")], env_id
    repro = py("-m", "dvc", "repro", "export")
    if repro.returncode != 0:
        return [("ERROR", str(folder), f"dvc repro export: {last_line(repro)}")], env_id
    check = py("-m", "gates", "check", "--only", "fresh_train", "export_md5", "--json")
    rows = []
    for gate in json.loads(check.stdout)["gates"]:
        if gate["id"] in ("fresh_train", "export_md5"):
            status = SAME if gate["status"] == "pass" else MOVED
            rows.append((status, f"{folder} ({gate['id']})", f"{gate['status'].upper()} {gate['message']}"))
    return rows, env_id


def example() -> list[tuple[str, str, str]]:
    out = py("-m", "dvc", "repro", "md5", cwd="examples/hf-trainer")
    what = "examples/hf-trainer/hf_registry/md5.json"
    md5_lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("md5: ")]
    return [(SAME if out.returncode == 0 else MOVED, what, md5_lines[-1] if md5_lines else last_line(out))]


def not_here(env_id: str) -> list[tuple[str, str]]:
    rows = []
    for kind in ("goldens", "baselines"):
        for folder in sorted(Path("registry", kind).iterdir()):
            if kind == "goldens" and folder.name == env_id:
                continue
            why = (
                "a GPU blessing: re-check on that GPU (ci/nightly-gpu.sh with the new lock)"
                if folder.name.startswith("cuda-")
                else "another CPU's golden: re-check on that machine"
                if kind == "goldens"
                else "a perf baseline (timings): the perf gates judge it in ci/main.sh"
            )
            rows.append((str(folder), why))
    return rows


def main() -> int:
    from importlib.metadata import PackageNotFoundError, version

    def have(name: str) -> str:
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} (absent)"

    stack = ", ".join(have(n) for n in ("torch", "transformers", "tokenizers", "safetensors", "numpy"))
    print(f"refresh: re-checked here (python {sys.version.split()[0]}, {stack}):")
    rows, env_id = golden()
    rows = models() + rows + example()
    for status, what, detail in rows:
        print(f"  {status:<6} {what}: {detail}")
    print("refresh: not re-checked here:")
    for what, why in not_here(env_id):
        print(f"  {what}: {why}")
    moved = [r for r in rows if r[0] in (MOVED, "ERROR")]
    checked = [r for r in rows if r[0] in (MOVED, SAME, "ERROR")]
    print(
        f"refresh: {len(moved)} of {len(checked)} re-checked blessings moved"
        + (": run the pipeline on the new lock, then bless with a reason or fix" if moved else "")
    )
    return 2 if any(r[0] == "ERROR" for r in rows) else 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
