"""What a run must look like (torch-free): the gates check a run's record before comparing its
numbers, so a cut, padded, hand-edited or mislabelled run is refused with a message instead of
being judged on whatever it happens to contain.

A record is first held to itself (metrics.json alone): its config_hash is the identity of its own
config (params/identity.py), its length and every per-step series are its config's train.steps,
its evals are the steps its config's train.eval_every implies (params/cadence.py) where our own
trainer wrote it, and any steps inside the run, in order, where another loop did (runrecord: a
stranger's loop evaluates where it does; the gates compare the steps both runs have), and its world
is what its per-rank lists hold. When the judging project's params.yaml describes runs (our
pipeline: model/train present), the runs must also be what it says (config and world): that is
how a run trained before a params.yaml edit is refused. A project of its own (a trainer gated with
runrecord) has no such file: there the records are the truth, and the gates that compare runs
refuse two of different config identity (gates/judges/ddp.py shape_problem).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from params.cadence import eval_steps
from params.config import Params
from params.identity import config_diff, config_identity, identity_view

SERIES = ("train_loss", "grad_norm", "lr")  # one value per optimizer step
SAMPLE_SERIES = ("count", "hash_sum", "dropout_hash_sum")  # samples.*: one per step too


def where(run: str) -> str:
    return f"runs/{run}/metrics.json"


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def identity_problems(run: str, m: dict[str, Any]) -> list[str]:
    """The record's config_hash is its own config's identity: else it was edited or mislabelled."""
    own = config_identity(m["config"])
    if m["config_hash"] == own:
        return []
    return [
        f"{where(run)}: config_hash: {m['config_hash']} is not the identity of the record's own config "
        f"({own}): a hand-edited or mislabelled record"
    ]


def foreign_recorder(m: dict[str, Any]) -> str | None:
    """The recorder that wrote the run when it is not xtrain's own trainer (runrecord names itself in
    determinism.recorder), else None."""
    recorder = (m.get("determinism") or {}).get("recorder")
    return recorder if isinstance(recorder, str) and recorder else None


def train_of(run: str, m: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The record's config.train if it gives the run's shape (steps >= 1, eval_every >= 0: optional
    where another loop wrote the record, whose evals are its own), else why not."""
    train = m["config"]["train"]
    if not isinstance(train, Mapping):
        return None, [f"{where(run)}: config.train: {train!r} is not a mapping"]
    optional = {"eval_every"} if foreign_recorder(m) else set()
    out = [
        f"{where(run)}: config.train.{key}: {train.get(key, '<absent>')!r} is not {what}: the gates take "
        f"the run's shape from it"
        for key, least, what in (
            ("steps", 1, "a step count (>= 1)"),
            ("eval_every", 0, "an eval cadence (>= 0)"),
        )
        if not _count(train.get(key), least) and not (key in optional and train.get(key) is None)
    ]
    return (None if out else dict(train)), out


def shape_problems(run: str, m: dict[str, Any], train: Mapping[str, Any], from_params: bool) -> list[str]:
    """Steps, every per-step series and the eval steps against `train`: the record's own config.train
    (`from_params`: it is params.yaml's too, and the messages name params.yaml as before)."""
    steps, out = train["steps"], []
    key, src = ("params.yaml train", "params.yaml") if from_params else ("config.train", "its config")
    if m["steps"] != steps:
        out.append(f"{where(run)}: steps {m['steps']}, {key}.steps is {steps}")
    lengths = {s: len(m[s]) for s in SERIES} | {f"samples.{s}": len(m["samples"][s]) for s in SAMPLE_SERIES}
    out += [f"{where(run)}: {s} has {n} values for {steps} steps" for s, n in lengths.items() if n != steps]
    return out + eval_problems(run, m, train, key, src)


def eval_problems(run: str, m: dict[str, Any], train: Mapping[str, Any], key: str, src: str) -> list[str]:
    """Our trainer's evals are the steps its cadence implies (params/cadence.py); another loop's are
    its own: any steps inside the run, each once, in order."""
    got = [e["step"] for e in m["eval"]]
    if foreign_recorder(m):
        late = [s for s in got if s > train["steps"]]
        if late:
            return [f"{where(run)}: eval at step {late[0]}, past the run's {train['steps']} steps"]
        if got != sorted(set(got)):
            return [f"{where(run)}: eval steps {got} are not in increasing order, each once"]
        return []
    want = eval_steps(train)
    if got != want:
        return [
            f"{where(run)}: eval steps {got}, {src} implies {want} ({key}.eval_every {train['eval_every']}: "
            "step 0, every eval_every steps and the last)"
        ]
    return []


def recorded_problems(run: str, m: dict[str, Any]) -> list[str]:
    """What a recorder said it saw against the series it wrote: eval-mode steps inside the run, and no
    masks fingerprinted where it says none were drawn (dropout none, or switched off)."""
    out = []
    late = [s for s in m.get("eval_mode_steps") or [] if s >= m["steps"]]
    if late:
        out.append(f"{where(run)}: eval_mode_steps {late} past the run's {m['steps']} steps")
    masks = (m.get("dropout") or {}).get("masks")
    drawn = [i for i, h in enumerate(m["samples"]["dropout_hash_sum"]) if h]
    if masks in ("none", "off") and drawn:
        out.append(f"{where(run)}: dropout.masks is {masks!r} but masks were drawn at step {drawn[0]}")
    return out


def world_problems(run: str, m: dict[str, Any]) -> list[str]:
    """The world against what the record's own per-rank lists hold (and a single run is one rank)."""
    world, out = m["world"], []
    if m["launcher"] == "single" and world != 1:
        out.append(f"{where(run)}: world {world}: a single-device run has world 1")
    ranks = [r["rank"] for r in m["cross_rank"]["per_rank"]]
    if ranks != list(range(world)):
        out.append(f"{where(run)}: cross_rank lists ranks {ranks} for world {world}")
    peak = ((m.get("perf") or {}).get("peak_memory") or {}).get("per_rank")
    if peak is not None and [r["rank"] for r in peak] != list(range(world)):
        out.append(
            f"{where(run)}: perf.peak_memory lists ranks {[r['rank'] for r in peak]} for world {world}"
        )
    return out


def params_problems(params: Params, run: str, m: dict[str, Any]) -> list[str]:
    """The run against params.yaml that describes runs: its config (naming the keys) and its world."""
    vocab = m["config"]["model"].get("vocab_size") if isinstance(m["config"]["model"], Mapping) else None
    out = []
    if not _count(vocab, 1):
        out.append(f"{where(run)}: config.model.vocab_size {vocab!r} is not a vocabulary size")
    else:
        want = params.run_config(vocab).to_dict()
        if m["config_hash"] != (want_hash := config_identity(want)):
            diff = config_diff(identity_view(want), identity_view(m["config"]))
            out.append(
                f"{where(run)}: config_hash {m['config_hash']}, params.yaml gives {want_hash} ({diff})"
            )
    if m["world"] != params.world(run):
        out.append(f"{where(run)}: world {m['world']}, params.yaml says {params.world(run)}")
    return out


def run_problems(params: Params | None, run: str, m: dict[str, Any]) -> list[str]:
    """Every way runs/<run>/metrics.json disagrees with itself and, where params.yaml describes runs,
    with params.yaml. `params` None or a project's own file: the record alone is the truth."""
    pipeline = params is not None and params.describes_runs
    out = identity_problems(run, m)
    train, bad = train_of(run, m)
    out += bad + (params_problems(params, run, m) if pipeline else [])
    if train is not None:  # when the config is params.yaml's, its train: is params.yaml's
        out += shape_problems(run, m, train, from_params=pipeline and not out)
    return out + recorded_problems(run, m) + world_problems(run, m)
