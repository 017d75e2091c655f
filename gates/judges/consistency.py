"""The consistency gate: each run agrees with itself, recomputed from its own files.

dvc.lock seals files one by one; an attacker who rewrites dvc.lock (or a producer that wrote one
file from other numbers than the next) can still make a run's files disagree. What recomputation
allows is checked here: summary.json, loss.csv and eval.csv are what metrics.json gives (the writer's
own formulas, xtrain.core.train.write_metrics), metrics.json's param_digest is the digest of the
run's final checkpoint, recomputed from model.safetensors with safetensors' numpy API (torch-free;
gates/reading/runs.py reads every file, this module judges what it read), and metrics.json agrees with its own config (gates/reading/expect.py, the record alone: config_hash is its
config's identity, its length and evals are its config's, its world its per-rank lists').
A disagreement fails (exit 1): the run is not one run's record.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.runs import ConsistencyRecords, RunFiles, final_checkpoint, read_consistency

THRESHOLD = "summary, loss.csv, eval.csv and the final checkpoint's digest equal metrics.json"


def summary_of(m: dict[str, Any]) -> dict[str, Any]:
    """xtrain.core.train.summary, recomputed (tests/pipeline/test_seals.py holds the two equal)."""
    return {
        "world": m["world"],
        "final_train_loss": m["train_loss"][-1],
        "initial_val_loss": m["initial_val_loss"],
        "final_val_loss": m["final_val_loss"],
        "tokens_per_s": round(m["tokens_per_s"], 1),
        "cross_rank_max_abs_diff": m["cross_rank"]["max_abs_diff"],
        "train_time_s": round(m["train_time_s"], 2),
    }


def csv_texts(m: dict[str, Any]) -> dict[str, str]:
    """loss.csv and eval.csv as xtrain.core.train.write_metrics writes them (repr: every bit of the float)."""
    loss = ["step,loss"] + [f"{i},{v!r}" for i, v in enumerate(m["train_loss"])]
    ev = ["step,val_loss"] + [f"{e['step']},{e['loss']!r}" for e in m["eval"]]
    return {"loss.csv": "\n".join(loss) + "\n", "eval.csv": "\n".join(ev) + "\n"}


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def run_problems(r: RunFiles) -> list[str]:
    """Every way one run's files disagree with its metrics.json (and the record with its own config)."""
    m, base = r.metrics, f"runs/{r.name}"
    problems = list(r.problems)
    if _canonical(r.summary) != _canonical(summary_of(m)):
        problems.append(f"{base}/summary.json is not what metrics.json gives ({_canonical(summary_of(m))})")
    for name, text in csv_texts(m).items():
        if r.texts[name] != text:
            problems.append(f"{base}/{name} differs from metrics.json's values")
    final = final_checkpoint(m)
    if r.latest != final:
        problems.append(f"{base}/checkpoints/latest is {r.latest!r}, metrics.json ends at {final}")
    model = f"{base}/checkpoints/{final}/model.safetensors"
    if r.digest is None:
        return [*problems, f"metrics.json ends at {final}, but {model} does not exist"]
    if r.digest != m["param_digest"]:
        problems.append(
            f"{base}/checkpoints/{final}/model.safetensors digests to {r.digest[:16]}..., "
            f"metrics.json param_digest is {m['param_digest'][:16]}..."
        )
    return problems


def consistency(r: ConsistencyRecords) -> Outcome:
    checked = [run.name for run in r.runs]
    problems = [p for run in r.runs for p in run_problems(run)]
    if not checked:
        return Outcome("skip", None, THRESHOLD, "no training stage has run")
    if problems:
        return failed(
            len(problems), THRESHOLD, "; ".join(problems) + ": the run's files are not one run's record"
        )
    return passed(0, THRESHOLD, f"runs {', '.join(checked)}: summary, csv and final checkpoint agree")


def consistency_picture(r: ConsistencyRecords, t: Thresholds) -> Picture:
    """Each run's files against what its metrics.json gives."""
    rows = []
    for files in r.runs:
        run, problems = files.name, run_problems(files)
        for name in ("summary.json", "loss.csv", "eval.csv", "checkpoints/latest", "model.safetensors"):
            bad = any(name in p for p in problems)
            rows.append(
                f"<tr class='{'bad' if bad else 'ok'}'><td>runs/{run}/{escape(name)}</td>"
                f"<td>{'DIFFERS' if bad else 'agrees'}</td></tr>"
            )
    if not rows:
        raise NoPicture("no training stage has run")
    return Picture(
        "<table class='files'><tr><th>file</th><th>against metrics.json</th></tr>"
        + "".join(rows)
        + "</table>",
        "Each run's summary, csv files, latest pointer and final weights (parameter digest recomputed "
        "from model.safetensors) against its metrics.json. Pass: every row agrees.",
    )


GATE = Gate(
    id="consistency",
    checks="each run agrees with itself: summary.json, loss.csv, eval.csv are what metrics.json gives; "
    "its param_digest is the digest of its final checkpoint (recomputed from model.safetensors)",
    threshold=lambda t: "equal",
    judge=lambda r, t: consistency(r),
    why="dvc.lock seals each file alone; someone who rewrites dvc.lock, or a writer that mixed two runs, "
    "can still leave files that disagree: recomputation catches what re-sealing hides",
    investigate="the message names the run and file; dvc repro -f the run's stage",
    takes=(),
    picture=consistency_picture,
    read=lambda a, t: read_consistency(a),
)
