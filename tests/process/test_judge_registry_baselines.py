"""registry/baselines.py under mutation (docs/judge-mutation.md): `registry bless --perf`, in-process.

Hand-written runs/<launcher>/metrics.json records (every key metrics.schema.json requires, the perf
fields as xtrain writes them) under a tmp folder, blessed into a registry from tests/judge_trees.py;
each test asserts the entry written, the printed diff and the one-line errors exactly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from contracts.errors import ValidationError
from judge_trees import make_registry
from registry import baselines as bl
from registry.sealed import seal
from registry.store import Registry, RegistryError

ENV = "cpu-test-env"
MIB = 2**20


def record(launcher: str, seconds=(9.0, 1.0, 2.0, 4.0), peaks=(100 * MIB,), env_id: str = ENV, **kw) -> dict:
    """runs/<launcher>/metrics.json: 1000 tokens/step, 10 steps a window, one warm-up window."""
    m = {
        "format": "xtrain-metrics/1", "launcher": launcher, "world": len(peaks), "device": "cpu",
        "precision": "fp32", "config_hash": "cfg12345", "config": {"seed": 1, "model": {}, "train": {}},
        "env": {"env_id": env_id, "torch": "2.13.0+cpu", "device_type": "cpu"}, "determinism": {},
        "steps": 40, "tokens_per_step": 1000, "n_params": 10, "train_loss": [1.0], "grad_norm": [1.0],
        "lr": [0.1], "eval": [], "samples": {"count": [1], "hash_sum": [1], "dropout_hash_sum": [0]},
        "initial_val_loss": None, "final_val_loss": None, "tokens_per_s": 1.0,
        "steady_tokens_per_s": 1.0, "train_time_s": 1.0, "wall_s": 1.0, "resumed_from_step": None,
        "param_digest": "d" * 64, "cross_rank": {"max_abs_diff": 0.0, "per_rank": [
            {"rank": r, "max_abs_diff": 0.0, "param_sum": 1.0} for r in range(len(peaks))]},
        "perf": {
            "warmup_windows": 1,
            "windows": [{"first_step": 10 * i, "steps": 10, "seconds": s} for i, s in enumerate(seconds)],
            "peak_memory": {"kind": "cpu_max_rss", "scope": "rank",
                            "per_rank": [{"rank": r, "bytes": b} for r, b in enumerate(peaks)]},
        },
    }  # fmt: skip
    m.update(kw)
    return m


def write_runs(root: Path, **records: dict) -> Path:
    runs = root / "runs"
    for launcher, m in records.items():
        (runs / launcher).mkdir(parents=True, exist_ok=True)
        (runs / launcher / "metrics.json").write_text(json.dumps(m))
    runs.mkdir(parents=True, exist_ok=True)
    return runs


def entry_of(m: dict) -> dict:
    """What a baseline keeps of a record: the raw fields the perf gates recompute from."""
    keys = ("launcher", "env_id", "world", "device", "config_hash", "tokens_per_step", "perf")
    return {**{k: m[k] for k in keys if k in m}, "env_id": m["env"]["env_id"]}


# -- stage_entry, read_stages ----------------------------------------------------------------------


def test_a_stage_entry_keeps_the_raw_perf_fields_and_the_records_env_id(tmp_path: Path) -> None:
    m = record("thread", peaks=(1, 2), env_id="cpu-a")
    m["env_id"] = "not-this-one"  # the environment's id wins over a stray top-level key
    entry = bl.stage_entry(m, tmp_path / "m.json")
    assert entry == {"launcher": "thread", "env_id": "cpu-a", "world": 2, "device": "cpu", "config_hash": "cfg12345",
                     "tokens_per_step": 1000, "perf": m["perf"]}  # fmt: skip
    assert list(entry) == ["launcher", "env_id", "world", "device", "config_hash", "tokens_per_step", "perf"]
    del m["device"]
    assert "device" not in bl.stage_entry(m, tmp_path / "m.json")
    assert bl.STAGE_KEYS == (
        "launcher",
        "env_id",
        "world",
        "device",
        "config_hash",
        "tokens_per_step",
        "perf",
    )


def test_a_record_without_perf_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    m = {k: v for k, v in record("single").items() if k != "perf"}
    with pytest.raises(RegistryError) as e:
        bl.stage_entry(m, tmp_path / "runs" / "single" / "metrics.json")
    assert str(e.value) == (
        f"{tmp_path / 'runs' / 'single' / 'metrics.json'}: perf: missing "
        "(written before perf recording; rerun the stage)"
    )


def test_read_stages_reads_those_present_in_launcher_order_env_of_the_first(tmp_path: Path) -> None:
    proc, thread = record("proc", env_id="cpu-p"), record("thread", peaks=(1, 2), env_id="cpu-t")
    runs = write_runs(tmp_path, proc=proc, thread=thread)
    stages, env = bl.read_stages(runs)
    assert list(stages) == ["thread", "proc"] and env == thread["env"]
    assert stages == {"thread": entry_of(thread), "proc": entry_of(proc)}
    single = record("single", env_id="cpu-s")
    write_runs(tmp_path, single=single)
    stages, env = bl.read_stages(runs)
    assert list(stages) == ["single", "thread", "proc"] and env == single["env"]


def test_no_runs_is_a_one_line_error(tmp_path: Path) -> None:
    runs = write_runs(tmp_path)
    (runs / "single").mkdir()  # a run folder without its metrics is not a run
    with pytest.raises(RegistryError) as e:
        bl.read_stages(runs)
    assert str(e.value) == f"{runs}: no runs/<launcher>/metrics.json to bless (run dvc repro first)"


def test_a_run_without_perf_names_its_file(tmp_path: Path) -> None:
    old = {k: v for k, v in record("thread", peaks=(1, 2)).items() if k != "perf"}  # metrics.schema allows it
    runs = write_runs(tmp_path, single=record("single"), thread=old)
    with pytest.raises(RegistryError) as e:
        bl.read_stages(runs)
    assert str(e.value) == (
        f"{runs / 'thread' / 'metrics.json'}: perf: missing (written before perf recording; rerun the stage)"
    )


def test_a_schema_error_in_a_record_names_the_file(tmp_path: Path) -> None:
    runs = write_runs(tmp_path, single={**record("single"), "world": "one"})
    with pytest.raises(Exception, match=r"runs/single/metrics.json: world"):
        bl.read_stages(runs)


# -- summary, show_diff ----------------------------------------------------------------------------


def test_summary_is_the_median_steady_rate_its_spread_and_the_peak(tmp_path: Path) -> None:
    # steady windows 1, 2, 4 s of 10,000 tokens: 10,000, 5,000, 2,500 tok/s; spread 7,500 / 5,000
    stage = entry_of(record("thread", peaks=(100 * MIB, 300 * MIB + MIB // 2)))
    assert bl.summary(stage) == "5,000 tok/s (spread 150%), peak 300 MiB"
    stage = entry_of(record("single", seconds=(1.0, 0.5, 0.5), peaks=(2500 * MIB,)))
    assert bl.summary(stage) == "20,000 tok/s (spread 0%), peak 2,500 MiB"
    warmup_only = entry_of(record("single", seconds=(1.0,), peaks=(MIB,)))
    assert bl.summary(warmup_only) == "nan tok/s (spread nan%), peak 1 MiB"


def test_the_first_diff_and_a_diff_from_the_last_version(capsys) -> None:
    single, thread = (
        entry_of(record("single")),
        entry_of(record("thread", seconds=(1.0, 1.0), peaks=(MIB, MIB))),
    )
    bl.show_diff(None, {"single": single})
    assert capsys.readouterr().out == (
        "first perf baseline for this environment:\n"
        "  single  (absent)  ->  5,000 tok/s (spread 150%), peak 100 MiB\n"
    )
    last = {"env_id": "cpu-x", "version": 3, "stages": {"single": single}}
    bl.show_diff(last, {"single": single, "thread": thread})
    assert capsys.readouterr().out.splitlines() == [
        "diff from cpu-x v3:",
        "  single  5,000 tok/s (spread 150%), peak 100 MiB  ->  5,000 tok/s (spread 150%), peak 100 MiB",
        "  thread  (absent)  ->  10,000 tok/s (spread 0%), peak 1 MiB",
    ]


# -- bless_baseline --------------------------------------------------------------------------------


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    return make_registry(tmp_path / "registry")


def params_file(tmp_path: Path) -> str:
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    return str(tmp_path / "params.yaml")


def test_the_first_blessing_writes_v1_sealed_indexed_and_valid(reg: Registry, tmp_path: Path, capsys) -> None:
    single = record("single")
    runs = write_runs(tmp_path, single=single)
    params = params_file(tmp_path)
    assert bl.bless_baseline(reg, runs, "first numbers of this box", params) == 0
    path = reg.root / "baselines" / ENV / "v1.json"
    assert capsys.readouterr().out.splitlines() == [
        "first perf baseline for this environment:",
        "  single  (absent)  ->  5,000 tok/s (spread 150%), peak 100 MiB",
        f"blessed perf baseline {path}",
    ]
    data = json.loads(path.read_text())
    prov = data["provenance"]
    assert data == seal({"format": "xtrain-perf-baseline/1", "env_id": ENV, "version": 1,
                         "stages": {"single": entry_of(single)}, "provenance": prov,
                         "reason": "first numbers of this box"})  # fmt: skip
    assert prov["env"] == single["env"] and prov["env_id"] == ENV
    assert prov["params_hash"] == hashlib.sha256(b"seed: 1\n").hexdigest()[:16]
    fresh = Registry(reg.root)  # a new reader checks the index: the file was recorded in it
    assert fresh.verify_index() == 5 and fresh.baseline(ENV).version == 1


def test_identical_numbers_bless_nothing_and_changed_ones_the_next_version(
    reg: Registry, tmp_path: Path, capsys
) -> None:
    runs = write_runs(tmp_path, single=record("single"))
    params = params_file(tmp_path)
    bl.bless_baseline(reg, runs, "first numbers of this box", params)
    capsys.readouterr()
    assert bl.bless_baseline(Registry(reg.root), runs, "the same numbers again", params) == 0
    assert capsys.readouterr().out == f"perf baseline for {ENV} is identical to v1: nothing to bless\n"
    assert sorted(p.name for p in (reg.root / "baselines" / ENV).iterdir()) == ["v1.json"]
    write_runs(tmp_path, thread=record("thread", seconds=(1.0, 1.0), peaks=(MIB, MIB)))
    assert bl.bless_baseline(Registry(reg.root), runs, "the thread stage is measured now", params) == 0
    path = reg.root / "baselines" / ENV / "v2.json"
    assert capsys.readouterr().out.splitlines() == [
        f"diff from {ENV} v1:",
        "  single  5,000 tok/s (spread 150%), peak 100 MiB  ->  5,000 tok/s (spread 150%), peak 100 MiB",
        "  thread  (absent)  ->  10,000 tok/s (spread 0%), peak 1 MiB",
        f"blessed perf baseline {path}",
    ]
    v2 = Registry(reg.root).baseline(ENV)
    assert (v2.version, v2.data["version"], list(v2.data["stages"])) == (2, 2, ["single", "thread"])
    assert v2.data["reason"] == "the thread stage is measured now"


def test_a_baseline_of_another_environment_is_not_compared(reg: Registry, tmp_path: Path, capsys) -> None:
    params = params_file(tmp_path)
    bl.bless_baseline(reg, write_runs(tmp_path / "a", single=record("single")), "numbers of box a", params)
    runs_b = write_runs(tmp_path / "b", single=record("single", env_id="cpu-b"))
    capsys.readouterr()
    assert bl.bless_baseline(Registry(reg.root), runs_b, "numbers of box b", params) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "first perf baseline for this environment:"
    assert out[-1] == f"blessed perf baseline {reg.root / 'baselines' / 'cpu-b' / 'v1.json'}"


def test_an_entry_the_schema_refuses_is_never_written(reg: Registry, tmp_path: Path) -> None:
    runs = write_runs(tmp_path, single=record("single", tokens_per_step="many"))
    with pytest.raises(Exception, match="tokens_per_step"):
        bl.bless_baseline(reg, runs, "a broken record here", params_file(tmp_path))
    assert not (reg.root / "baselines").exists()


def test_an_entry_the_baseline_schema_refuses_names_the_file_never_written(
    reg: Registry, tmp_path: Path
) -> None:
    runs = write_runs(tmp_path, single=record("single"))
    with pytest.raises(ValidationError) as e:
        bl.bless_baseline(reg, runs, "too short", params_file(tmp_path))  # the CLI asks 10 characters first
    assert (
        str(e.value)
        == f'{reg.root / "baselines" / ENV / "v1.json"}: reason: "too short" is invalid (rule: minLength 10)'
    )
    assert not (reg.root / "baselines").exists()


def test_a_baseline_of_a_non_finite_run_is_refused_naming_the_file(tmp_path: Path) -> None:
    runs = write_runs(tmp_path, single=record("single"), proc=record("proc", seconds=(9.0, float("nan"))))
    with pytest.raises(ValidationError) as e:
        bl.read_stages(runs)
    assert str(e.value).startswith(
        f"{runs / 'proc' / 'metrics.json'}: perf.windows[1].seconds: nan is not a finite number"
    )
