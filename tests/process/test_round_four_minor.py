"""Issue #36 item 7: leftovers named, the right file named, arguments validated; each with a control."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PARAMS, REPO


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-800:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


COPY_UNDER_ULIMIT = """
import resource, shutil, signal, sys
from pathlib import Path
from contracts.fileio import naming_the_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
src, dest = Path(sys.argv[1]), Path(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
with naming_the_file(dest):
    shutil.copyfile(src, dest)
"""


def test_a_copy_over_the_file_size_limit_names_the_file_written(tmp_path: Path) -> None:
    """`ulimit -f` during `registry pin` named the source checkpoint; the file written is the one."""
    src, dest = tmp_path / "model.safetensors", tmp_path / "pinned-copy"
    src.write_bytes(b"x" * 65536)
    proc = run("-c", COPY_UNDER_ULIMIT, str(src), str(dest))
    assert "FileWriteError" in proc.stderr and f"{dest}: cannot write" in proc.stderr, proc.stderr[-600:]
    assert f"{src}: cannot write" not in proc.stderr  # the source was only read


def test_an_interrupted_exports_leftover_is_named_not_removed(tmp_path: Path, capsys) -> None:
    """A SIGKILL during export leaves `.fresh.XXXX.tmp/`: the next export names it (the registry names its own)."""
    from contracts import outputs

    out = tmp_path / "exports" / "fresh"
    left = tmp_path / "exports" / ".fresh.k2j4.tmp"
    left.mkdir(parents=True)
    from pipeline.export import main

    assert main(["no-such-checkpoint", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"warning: {left}: left by an interrupted export" in err and left.is_dir()
    assert outputs.leftovers(tmp_path / "exports" / "pinned") == []  # the control: only its own twins


@pytest.mark.parametrize(
    ("flag", "value", "needle"),
    [("--window", "0", "0 is not >= 1"), ("--windows", "0", "0 is not >= 1"), ("--batch", "-4", "-4 is not >= 1"),
     ("--warmup", "-1", "-1 is not >= 0")],
)  # fmt: skip
def test_bench_counts_are_validated_by_argparse(flag: str, value: str, needle: str, capsys) -> None:
    from pipeline.bench import parser

    with pytest.raises(SystemExit) as e:
        parser().parse_args([flag, value])
    assert e.value.code == 2 and needle in capsys.readouterr().err
    assert parser().parse_args([flag, "1"])  # the control: a count of one is fine


def test_bench_seq_longer_than_the_model_is_one_line(capsys) -> None:
    """`--seq 100000` (ref's max_seq_len is 256) is refused before anything is timed."""
    from pipeline.bench import main

    assert main(["--params", str(PARAMS), "--configs", "ref", "--seq", "100000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seq" in err[0] and "longer than ref's max_seq_len 256" in err[0], err


def test_to_onnx_of_a_run_folder_is_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "single"
    (run_dir / "checkpoints").mkdir(parents=True)
    one_line(run("-m", "pipeline.to_onnx", str(run_dir), str(tmp_path / "x.onnx")), "not an export folder")
    assert not (tmp_path / "x.onnx").exists()


def test_registry_index_refuses_a_folder_that_is_no_registry(tmp_path: Path) -> None:
    """`registry index` wrote an index into any folder; a registry, or a new one, is still indexed."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine\n")
    one_line(run("-m", "registry", "--root", str(tmp_path / "notes"), "index"), "not a registry")
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["todo.txt"]
    (tmp_path / "fresh" / "models").mkdir(parents=True)
    proc = run("-m", "registry", "--root", str(tmp_path / "fresh"), "index")
    assert proc.returncode == 0 and (tmp_path / "fresh" / "index.json").is_file(), proc.stderr


def test_a_number_as_a_params_key_is_a_one_line_error(tmp_path: Path) -> None:
    """Hypothesis found it: `train: {1: 2}` under a profile crashed the error path (TypeError) instead
    of naming the key; the key is the file's own text, whatever its YAML type."""
    from contracts.validate import ValidationError
    from params.config import load_params

    text = PARAMS.read_text().replace("\n  cpu: {}\n", "\n  cpu: {train: {1: 2}}\n", 1)
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ValidationError) as err:
        load_params(tmp_path / "params.yaml")
    assert "(profiles.cpu.train): 1: unknown key" in str(err.value) and "\n" not in str(err.value)
