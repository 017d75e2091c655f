"""Shared fixtures: a tiny corpus, tokenizer and model config that train in about a second on CPU."""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import hypothesis_profiles  # noqa: F401 (sample sizes load before any test: the header names the profile)

REPO = Path(__file__).resolve().parents[1]

# The tiers (docs/house.md, "Where a new test goes"): what a test starts decides its folder, and the
# folder gives it its marker (`pytest -m unit`, `ci/test.sh --quick`). A test module may import
# another's helpers across folders (`from test_judge_training import record`): every tier folder is
# on sys.path, as tests/ itself is (pytest's prepend import mode puts each collected file's own folder).
TIERS = ("unit", "process", "pipeline", "gpu")
TESTS = Path(__file__).resolve().parent
sys.path[1:1] = [str(TESTS / tier) for tier in TIERS if str(TESTS / tier) not in sys.path]

# Working files a test must not read unless it tests them: the GPU nightly switches params.yaml to
# the gpu profile and its worlds, and `dvc repro` rewrites dvc.lock, in the very checkout it tests.
PINNED = ("params.yaml", "dvc.lock")


def committed(rel: str) -> bytes:
    """`rel` as the tests read it: $XTRAIN_TEST_PARAMS for params.yaml (a developer testing an
    uncommitted edit points it at the working file), else the committed version (git HEAD), else,
    in a tree without git history, the working file."""
    if rel == "params.yaml" and os.environ.get("XTRAIN_TEST_PARAMS"):
        return Path(os.environ["XTRAIN_TEST_PARAMS"]).read_bytes()
    git = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=REPO, capture_output=True)
    return git.stdout if git.returncode == 0 else (REPO / rel).read_bytes()


def _pin() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="xtrain-tests-pinned-"))
    atexit.register(shutil.rmtree, folder, True)
    for rel in PINNED:
        (folder / rel).write_bytes(committed(rel))
    return folder / "params.yaml"


# The params.yaml every test reads (never REPO / "params.yaml"): one copy per test process.
PARAMS = _pin()


# Subprocesses started from the pinned folder (below) import the code under test: a `-m` or `-c`
# run puts its cwd first on sys.path, so a scratch copy's own code still wins in its own folder.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
# The suite oversubscribes its cores by design (xdist workers, each starting ranks with their own
# intra-op threads): OpenMP threads that spin while they wait burn the cores the other ranks need
# (a torchrun world-2 run of the tiny config: 12 CPU s spinning, 9.4 passive). Scheduling only: the
# numbers are the same. Set before torch loads its OpenMP runtime, inherited by every subprocess.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def code_first(root: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with `root`'s code first on PYTHONPATH and the rest kept behind
    it: an offline runner's wheelhouse is on PYTHONPATH (the GPU nightly lost jsonschema and dvc
    where a test replaced it)."""
    base = dict(os.environ if env is None else env)
    rest = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**base, "PYTHONPATH": os.pathsep.join([str(root), *rest])}


@pytest.fixture(autouse=True, scope="session")
def _cwd_holds_the_pinned_params():
    """The tests run in the pinned folder: a command or loader that falls back to ./params.yaml
    (or ./dvc.lock) reads the pinned copy, never the checkout's working file."""
    before = os.getcwd()
    os.chdir(PARAMS.parent)
    yield
    os.chdir(before)


def pytest_report_header() -> str:
    same = PARAMS.read_bytes() == (REPO / "params.yaml").read_bytes()
    where = "$XTRAIN_TEST_PARAMS" if os.environ.get("XTRAIN_TEST_PARAMS") else "git HEAD"
    return f"params.yaml for the tests: {where} ({'same as' if same else 'differs from'} the working file)"


def tier_of(path: Path) -> str | None:
    """The tier folder under tests/ that holds `path` (None: a file outside the four)."""
    path = Path(path).resolve()
    return path.parent.name if path.parent.parent == TESTS and path.parent.name in TIERS else None


# What the AST check of tests/unit/test_house_tiers.py cannot see: a process the code under test starts
# (git asked about a checkout, a CLI run by a helper). An audit hook watches each unit test's call.
SPAWN_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.spawn",
        "pty.spawn",
    }
)
_spawned: list[list[str]] = []  # one list per unit test running (a stack: a test may watch a call itself)


def _audit(event: str, args: tuple) -> None:
    if _spawned and event in SPAWN_EVENTS:
        _spawned[-1].append(f"{event} {str(args[0] if args else '')[:80]}")


sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A unit test that starts a process fails, naming it: the test belongs in tests/process/."""
    if item.get_closest_marker("unit") is None:
        return (yield)
    _spawned.append([])
    try:
        result = yield
    finally:
        seen = _spawned.pop()
    if seen:
        raise pytest.fail.Exception(
            f"a unit test started {len(seen)} process(es) ({'; '.join(seen[:3])}): "
            "it belongs in tests/process/ (docs/house.md, 'Where a new test goes')",
            pytrace=False,
        )
    return result


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets its folder's tier marker. The gate tree is built once per xdist worker (~50-70 s):
    a test that uses it outside the `tree` group makes a second worker build it, and in the serial DDP
    chain (the suite's and the nightly's long pole) it would cost the chain that time."""
    for item in items:
        tier = tier_of(item.path)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
        if builds_tree_elsewhere(item):
            raise pytest.UsageError(
                f"{item.nodeid}: uses gate_tree outside the xdist group `tree`: mark it tree"
            )


def builds_tree_elsewhere(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("xdist_group")
    group = (marker.args or [marker.kwargs.get("name")])[0] if marker else None
    return "gate_tree" in getattr(item, "fixturenames", ()) and group != "tree"


WORDS = [
    "the",
    "king",
    "queen",
    "lord",
    "lady",
    "love",
    "death",
    "night",
    "day",
    "sword",
    "crown",
    "heart",
    "blood",
    "fair",
    "foul",
    "speak",
    "hear",
    "thou",
    "thee",
    "thy",
    "art",
    "hath",
    "doth",
    "good",
    "ill",
    "sweet",
    "gentle",
    "noble",
    "false",
    "true",
    "honour",
    "grace",
    "fortune",
]


def tiny_text(n_words: int = 30000, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines, line = [], []
    for _ in range(n_words):
        line.append(rng.choice(WORDS))
        if len(line) >= rng.randint(5, 12):
            lines.append(" ".join(line).capitalize() + rng.choice([".", ",", "!", "?"]))
            line = []
    return "\n".join(lines) + "\n"


# The tiny config, in one place: the Python-side specs and the CLI overrides are built from it.
TINY_SEED = 1234
TINY_MODEL = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_dim": 64, "max_seq_len": 32}
TINY_TRAIN = {
    "seq_len": 16,
    "global_batch": 8,
    "grad_accum": 1,
    "steps": 12,
    "lr": 3e-3,
    "min_lr": 3e-4,
    "warmup_steps": 2,
    "eval_every": 6,
    "eval_batches": 2,
    "ckpt_every": 6,
    "log_every": 3,
    "cpu_threads": 2,  # the CLI runs; tiny_run_config uses 1 unless a test asks for more
}


@dataclass(frozen=True)
class TinyData:
    text: Path
    tokenizer: Path
    tokens: Path
    vocab_size: int


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> TinyData:
    from xtrain.core.corpus import Document, build_corpus
    from xtrain.core.tokenizer import encode_text, save_tokenizer, save_tokens, train_tokenizer

    root = tmp_path_factory.mktemp("tiny")
    text, meta = build_corpus([Document("tiny.txt", tiny_text())], 0.1, {"kind": "test"})
    (root / "corpus.txt").write_text(text)
    cut = meta["split"]["train"]["end"]
    tok = train_tokenizer(text[:cut], 300, 2)
    save_tokenizer(tok, root / "tokenizer.json")
    save_tokens(root / "tokens.safetensors", encode_text(tok, text[:cut]), encode_text(tok, text[cut:]))
    return TinyData(
        root / "corpus.txt", root / "tokenizer.json", root / "tokens.safetensors", tok.get_vocab_size()
    )


@functools.cache
def params_train() -> dict:
    """params.yaml's train section on the CPU profile: the values a tiny config does not set (as the CLI runs)."""
    from params.config import load_params

    return dict(load_params(str(PARAMS), ["profile=cpu"])["train"])


def tiny_run_config(
    vocab_size: int, model: dict | None = None, train: dict | None = None, seed: int = TINY_SEED
):
    from params.config import ModelConfig, RunConfig, TrainConfig

    m = {"vocab_size": vocab_size, **TINY_MODEL, **(model or {})}
    t = {**params_train(), **TINY_TRAIN, "cpu_threads": 1, **(train or {})}
    return RunConfig(seed=seed, model=ModelConfig(**m), train=TrainConfig(**t))


def tiny_spec(
    data: TinyData,
    launcher: str = "single",
    run_dir: Path | None = None,
    resume: bool = False,
    model: dict | None = None,
    train: dict | None = None,
    seed: int = 1234,
):
    from xtrain.core.launch_plan import RunSpec

    return RunSpec(
        run=tiny_run_config(data.vocab_size, model, train, seed),
        tokens_path=str(data.tokens),
        launcher=launcher,
        run_dir=str(run_dir) if run_dir else None,
        tokenizer_path=str(data.tokenizer),
        resume=resume,
    )


def replace_train(spec, **changes):
    run = dataclasses.replace(spec.run, train=dataclasses.replace(spec.run.train, **changes))
    return dataclasses.replace(spec, run=run)


TINY_OVERRIDES = (
    "profile=cpu",  # tests exercise code, not the workspace's profile switch (the GPU nightly flips it)
    *(f"model.{k}={v}" for k, v in TINY_MODEL.items()),
    *(f"train.{k}={v}" for k, v in TINY_TRAIN.items()),
    f"seed={TINY_SEED}",
)


def tiny_cli(data: TinyData, run_dir: Path, *extra: str) -> list[str]:
    """Arguments for `pipeline.train` that train the tiny config on the tiny data."""
    sets = [a for o in (*TINY_OVERRIDES, *extra) for a in ("--set", o)]
    return [
        "--params",
        str(PARAMS),
        *sets,
        "--tokens",
        str(data.tokens),
        "--tokenizer",
        str(data.tokenizer),
        "--run-dir",
        str(run_dir),
    ]


@pytest.fixture(scope="session")
def gate_tree(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real artifact tree the gate tests break (tests/gate_tree.py), built once per session."""
    from gate_tree import build_tree

    return build_tree(tiny_data, tmp_path_factory.mktemp("tree"))


def scratch_repo(dest: Path) -> Path:
    """The tracked files of this worktree (committed or not) in a fresh git repo, with DVC offline and
    its default remote beside it (`DEST.remote`, never the user's run cache); params.yaml and dvc.lock
    are the committed ones (PINNED), not the checkout's working files."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in filter(None, (f.decode() for f in files)):
        if (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    for rel in PINNED:
        if (dest / rel).exists():
            (dest / rel).write_bytes((PARAMS.parent / rel).read_bytes())
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    # the default remote is the user's shared run cache (.dvc/config): a test's pushes stay beside it
    (dest / ".dvc" / "config.local").write_text(f"['remote \"shared\"']\n    url = {dest}.remote\n")
    return dest


@pytest.fixture(scope="session")
def cuda_runs(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory):
    """The GPU tests' shared training runs (tests/cuda_runs.py), made on first use."""
    from cuda_runs import CudaRuns

    return CudaRuns(tiny_data, tmp_path_factory.mktemp("cuda-runs"))


@pytest.fixture(scope="session")
def proc_runs(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory):
    """Real torchrun runs of the tiny config shared by the DDP tests that only read them (tests/proc_runs.py)."""
    from proc_runs import ProcRuns

    return ProcRuns(tiny_data, tmp_path_factory.mktemp("proc-runs"))


@pytest.fixture()
def drawn(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures a gate's picture drew (plots.to_svg replaced: the figure, not its bytes, is under
    test); the judge's unit tests read lines, bars and text from them."""
    from gates.judges import plots

    figures: list = []

    def keep(fig) -> str:
        figures.append(fig)
        return "<svg/>"

    monkeypatch.setattr(plots, "to_svg", keep)
    return figures
