"""Issue #27 items 7 / "What to build" 5: every input is validated before use and bounded.

Each case from the hostile review is one line `error: FILE: KEY: problem`, exit 2, nothing written;
each comes with its positive control (the legitimate input still works).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from conftest import REPO, TINY_OVERRIDES, TinyData, tiny_cli
from contracts.validate import ValidationError
from params.config import load_params
from xtrain.core.tokenizer import load_tokens, save_tokens

PARAMS = (REPO / "params.yaml").read_text()


def run(*args: str, cwd: Path = REPO, timeout: float = 60) -> subprocess.CompletedProcess:
    """A command line; a hang past `timeout` is a failure of the test, not of the suite."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)), "DVC_NO_ANALYTICS": "1"}
    try:
        return subprocess.run(
            [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args)} hung past {timeout}s")


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The single error line of a refused command (exit 2, no traceback), holding every needle."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-1500:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def params_file(tmp_path: Path, text: str, name: str = "params.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def show(path: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return run("-m", "pipeline.config", "--params", str(path), "show", timeout=timeout)


def test_the_real_params_file_is_accepted(tmp_path: Path) -> None:
    """Positive control for everything below: the committed params.yaml (both profiles) loads."""
    assert show(params_file(tmp_path, PARAMS)).returncode == 0
    load_params(REPO / "params.yaml", ["profile=gpu"])


# ---- YAML: aliases, duplicate keys, encoding, size -----------------------------------------------


def alias_bomb(depth: int) -> str:
    """`billion laughs`: 9 references per level; ~1 KB of text, 9**depth nodes once expanded."""
    lines = ["  - &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, depth + 1):
        lines.append(f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    # under gates: (validated by the gates only, before) and printed by `config show`: hung > 180 s
    text = PARAMS.replace("gates:\n", "gates:\n  bomb:\n" + alias_bomb(10).replace("  -", "    -"), 1)
    assert len(text.encode()) - len(PARAMS.encode()) < 8192
    t0 = time.monotonic()
    line = one_line(show(params_file(tmp_path, text), timeout=30), "params.yaml", "line ", "anchor &a0")
    assert time.monotonic() - t0 < 30, line


def test_any_alias_or_merge_key_is_refused(tmp_path: Path) -> None:
    """params.yaml needs none: even a harmless alias is refused (bounding expansion would still let
    one line hide what a value is)."""
    harmless = PARAMS.replace("seed: 1337", "seed: &s 1337\nbomb: *s")
    one_line(show(params_file(tmp_path, harmless)), "anchor &s")
    merged = PARAMS.replace("  cpu: {}\n", "  cpu: {<<: {train: {steps: 3}}}\n", 1)
    one_line(show(params_file(tmp_path, merged)), "merge key")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("seed: 1337\n", "seed: 1337\nseed: 7\n", "'seed'"),
        ("  log_every: 3\n", "  log_every: 3\n  log_every: 100000\n", "'log_every'"),
        ("  cpu: {}\n", "  cpu: {}\n  cpu: {train: {steps: 1}}\n", "'cpu'"),
    ],
    ids=["top", "nested", "profile"],
)
def test_a_duplicate_key_is_refused_naming_it(tmp_path: Path, old: str, new: str, key: str) -> None:
    assert old in PARAMS
    line = one_line(show(params_file(tmp_path, PARAMS.replace(old, new, 1))), "duplicate key " + key)
    assert "first at line" in line


def test_a_non_utf8_params_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_bytes(PARAMS.replace("# xtrain-gates", "# xtrain-gates \xe9").encode("latin-1"))
    one_line(show(path), str(path), "not UTF-8")
    one_line(run("-m", "gates", "--params", str(path), "list"), "not UTF-8")


def test_special_and_huge_params_files_are_refused(tmp_path: Path) -> None:
    one_line(show(Path("/dev/zero"), timeout=30), "/dev/zero", "not a regular file")
    big = params_file(tmp_path, PARAMS + "#" * (2 << 20) + "\n", "big.yaml")
    one_line(show(big), "big.yaml", "larger than the limit")


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    deep = PARAMS.replace("  cpu: {}\n", "  cpu: {}\n  deep: " + "[" * 5000 + "]" * 5000 + "\n", 1)
    one_line(show(params_file(tmp_path, deep)), "nested deeper than")


# ---- ranges: params and thresholds --------------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        "train.steps=1000000000000000000000000000000",
        "train.global_batch=1000000000",
        "train.eval_every=1000000000000",
        "model.dim=1000000",
        "model.n_layers=100000",
        "launchers.thread.world=100000",
        "launchers.timeout_s=1e12",
        "scaling.worlds=[1, 100000]",
        "closed_loop.new_tokens=1000000000000",
        "train.lr=1e6",
    ],
)
def test_out_of_range_params_are_refused_naming_the_key(override: str) -> None:
    key = override.split("=")[0]
    with pytest.raises(ValidationError) as e:
        load_params(REPO / "params.yaml", ["profile=cpu", override])
    assert e.value.key.startswith(key), str(e.value)


@pytest.mark.parametrize(
    "override",
    [
        "gates.loss_match.max_rel=-1",
        "gates.loss_match.max_rel=.inf",
        "gates.loss_match.max_rel=2",
        "gates.launcher_parity.max_rel=0",
        "gates.cross_rank.max_abs=-1e-9",
        "gates.loss_match.cpu.final_val_atol=0",
        "gates.loss_match.cpu.first_step_rtol=-1e-5",
        "gates.fresh_train.approx.cpu.loss_rtol=-1",
        "gates.scaling.cpu.band=1.5",
        "gates.scaling.cpu.max_spread=0",
        "gates.perf.cpu.slowdown=1",
        "gates.perf.cuda.memory_growth=-0.1",
    ],
)
def test_nonsense_thresholds_are_refused_by_every_reader(override: str, tmp_path: Path) -> None:
    key = override.split("=")[0]
    with pytest.raises(ValidationError) as e:
        load_params(REPO / "params.yaml", ["profile=cpu", override])
    assert e.value.key == key and str(e.value).startswith(str(REPO / "params.yaml")), str(e.value)
    # the gates read the file themselves: write the edit in and ask them
    from params.config import load_thresholds

    raw = yaml.safe_load(PARAMS)
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = yaml.safe_load(override.split("=", 1)[1])
    path = params_file(tmp_path, yaml.safe_dump(raw))
    with pytest.raises(ValidationError) as e2:
        load_thresholds(path)
    assert e2.value.key == key, str(e2.value)


def test_the_thresholds_in_use_are_accepted() -> None:
    """Control: the committed thresholds (both devices) pass the tighter schema."""
    from params.config import load_thresholds

    assert load_thresholds(REPO / "params.yaml")["loss_match"]["max_rel"] == 1e-3


# ---- data: special files, token ids, device -------------------------------------------------------


def corpus_params(tmp_path: Path, data_path: str) -> Path:
    text = PARAMS.replace("  source: shakespeare ", "  source: file ", 1).replace(
        "  path: null", f"  path: {data_path}", 1
    )
    return params_file(tmp_path, text)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_a_special_file_as_data_path_is_refused(tmp_path: Path, kind: str) -> None:
    target = {"dev-zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "folder": str(tmp_path)}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    work = tmp_path / "work"
    work.mkdir()
    params = corpus_params(work, target)
    one_line(
        run("-m", "pipeline.corpus", "--params", str(params), cwd=work, timeout=60),
        "data.path",
        "not a regular file",
    )
    assert sorted(p.name for p in work.iterdir()) == ["params.yaml"]  # nothing written


def test_a_text_file_as_data_path_still_works(tmp_path: Path, tiny_data: TinyData) -> None:
    """Control: a regular UTF-8 file is read."""
    from xtrain.core.corpus import read_text_file

    assert read_text_file(str(tiny_data.text))[0].text.startswith(tiny_data.text.read_text()[:20])


def tokens_with(tmp_path: Path, tiny_data: TinyData, edit) -> Path:
    t = load_tokens(tiny_data.tokens)
    train = t["train"].clone()
    edit(train)
    path = tmp_path / "tokens.safetensors"
    save_tokens(path, train, t["val"])
    return path


def train_cli(tiny_data: TinyData, run_dir: Path, tokens: Path, *extra: str) -> subprocess.CompletedProcess:
    args = tiny_cli(tiny_data, run_dir, *extra)
    args[args.index("--tokens") + 1] = str(tokens)
    return run("-m", "pipeline.train", "single", *args, timeout=300)


@pytest.mark.parametrize(
    ("edit", "bad"),
    [
        (lambda t: t.__setitem__(-1, 5000), "5000"),  # one id, at the end: never sampled, exit 0 before
        (lambda t: t.__setitem__(slice(None), t % 7 + 300), "30"),  # every id past a 300-entry vocab
        (lambda t: t.__setitem__(0, -3), "-3"),
    ],
    ids=["one-unsampled", "all", "negative"],
)
def test_token_ids_outside_the_vocab_are_refused_before_training(
    tmp_path: Path, tiny_data: TinyData, edit, bad: str
) -> None:
    tokens = tokens_with(tmp_path, tiny_data, edit)
    run_dir = tmp_path / "run"
    line = one_line(train_cli(tiny_data, run_dir, tokens), str(tokens), "outside the vocabulary", bad)
    assert f"({tiny_data.vocab_size} tokens)" in line
    assert not run_dir.exists() and not (tmp_path / ".run.partial").exists()


def test_token_ids_inside_the_vocab_train(tmp_path: Path, tiny_data: TinyData) -> None:
    """Control: the largest legal id (vocab - 1) is accepted and the run completes."""
    tokens = tokens_with(tmp_path, tiny_data, lambda t: t.__setitem__(-1, tiny_data.vocab_size - 1))
    proc = train_cli(tiny_data, tmp_path / "run", tokens, "train.steps=2", "train.warmup_steps=1")
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_a_gpu_is_one_line(tmp_path: Path, tiny_data: TinyData) -> None:
    proc = train_cli(tiny_data, tmp_path / "run", tiny_data.tokens, "train.device=cuda")
    one_line(proc, "train.device", "no CUDA device")
    assert not (tmp_path / "run").exists()


# ---- export: names and the tokenizer file --------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("inputs") / "run"
    args = tiny_cli(tiny_data, run_dir, "train.steps=2", "train.warmup_steps=1")
    proc = run("-m", "pipeline.train", "single", *args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


def test_an_injected_export_name_is_one_line(tiny_run: Path, tmp_path: Path) -> None:
    """The command: before, the newline wrote a heading into the model card."""
    out = tmp_path / "out"
    line = one_line(
        run("-m", "pipeline.export", str(tiny_run), str(out), "--name", "evil\n# injected"),
        "--name",
        "not a safe model name",
    )
    assert "evil\\n# injected" in line  # shown escaped, on the one line
    assert not out.exists()


@pytest.mark.parametrize("name", ["a b", "x" * 65, "", "<script>", "../up", "name:\n  evil: true", "é"])
def test_an_unsafe_export_name_is_refused(tiny_run: Path, tmp_path: Path, name: str) -> None:
    from xtrain.export.hf_folder import export

    out = tmp_path / "out"
    with pytest.raises(ValidationError, match="not a safe model name"):
        export(tiny_run, out, "fp32", name=name)
    assert not out.exists()


def test_a_safe_export_name_titles_the_card(tiny_run: Path, tmp_path: Path) -> None:
    from xtrain.export.hf_folder import export

    export(tiny_run, tmp_path / "out", "fp32", name="My-model_v1.2")
    assert "# My-model_v1.2\n" in (tmp_path / "out" / "README.md").read_text()


def test_etc_passwd_as_the_export_tokenizer_is_one_line(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    one_line(
        run("-m", "pipeline.export", str(tiny_run), str(out), "--tokenizer", "/etc/passwd"), "/etc/passwd"
    )
    assert not out.exists()


@pytest.mark.parametrize("tokenizer", ["/dev/zero", "/etc", "latin1"])
def test_a_bad_tokenizer_file_for_export_is_refused(tiny_run: Path, tmp_path: Path, tokenizer: str) -> None:
    from xtrain.export.hf_folder import export

    if tokenizer == "latin1":
        tokenizer = str(tmp_path / "tok.json")
        Path(tokenizer).write_bytes(b'{"version": "\xe9"}')
    out = tmp_path / "out"
    with pytest.raises(ValidationError) as e:
        export(tiny_run, out, "fp32", tokenizer)
    assert str(e.value).startswith(tokenizer) and "\n" not in str(e.value)
    assert not out.exists()


# ---- gates: an output path that is a folder --------------------------------------------------------


@pytest.mark.parametrize("flag", ["--html", "--junit", "--markdown", "--report"])
def test_a_folder_as_a_gates_output_is_one_line_and_writes_nothing(tmp_path: Path, flag: str) -> None:
    root = tmp_path / "repo"
    (root / "reports").mkdir(parents=True)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    del params["gates"]["scope"]  # not our pipeline: it declares no scope
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "dvc.yaml").write_text("stages:\n  hello:\n    cmd: echo hi\n")  # every gate but the seals
    (root / "dvc.lock").write_text("schema: '2.0'\nstages:\n  hello:\n    cmd: echo hi\n")  # skips: exit 0
    assert run("-m", "gates", "--root", str(root), "check").returncode == 0  # control
    (root / "reports" / "gates.json").unlink()
    one_line(
        run("-m", "gates", "--root", str(root), "check", flag, "reports"), "reports", flag, "is a folder"
    )
    assert list((root / "reports").iterdir()) == []


def test_tiny_overrides_still_validate() -> None:
    """Control: the test suite's own tiny config is within every new range."""
    load_params(REPO / "params.yaml", list(TINY_OVERRIDES))
