"""Issue #36 item 2: one output guard for every writer.

Before, `pipeline.to_onnx exports/fresh params.yaml` and `pipeline.bench --json params.yaml` replaced
params.yaml (exit 0), `gates mutate --json params.yaml` wrote its report over it, `gates mutate
--work W` deleted a `W/base` it did not make, `gates check --markdown pipeline/__init__.py`
replaced an empty `__init__.py`, and `--html` through a symlinked folder wrote outside the repository.

Every CLI flag that names an output path is found in the argparse parsers themselves: each command's
parser is captured at its parse_args (no refactor of the commands), and every value-taking flag is
walked, subcommands included. A flag marked by `contracts.outputs.output_flag` is an output; any other
flag whose name or help says out/report/json/html/dir/... must be listed below as an input with the
reason, so a new output flag cannot be forgotten. Each output flag is pointed at params.yaml, a source
file, an empty source file git tracks, an unrelated folder and a path through a symbolic link out of
the repository: exit 2, one line naming the path, and no byte of the tree changes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import PARAMS, REPO

# each command module and the argv that reaches each of its parsers (pipeline.scaling's rank command
# has its own); every pipeline module with a main() must be here (test_every_command_is_walked)
COMMANDS: dict[str, list[list[str]]] = {
    "gates.__main__": [[]],
    "registry.__main__": [[]],
    **{f"pipeline.{m}": [[]] for m in (
        "bench", "busy_scaling", "closed_loop", "config", "corpus", "env", "export", "pilot", "probes",
        "repro", "to_onnx", "tokenizer", "train",
    )},
    "pipeline.scaling": [[], ["rank"]],
}  # fmt: skip
# a name part (between - and _) that says output, or help that says the flag is written
OUTPUTISH = re.compile(
    r"(^|[-_ ])(out|report|json|html|junit|markdown|work|cache|result|save|dir|tree|staging|root)($|[-_ ])"
)
WRITTEN = re.compile(r"\bwrit(e|es|ten)\b")
INPUTS = {  # flags whose name sounds like an output, and why they are not one
    ("gates.__main__", (), "root"): "the repository judged: check writes only what --report/--html/--junit/--markdown name",
    ("registry.__main__", (), "root"): "the registry that bless/pin/index extend: refused unless one (or new): check_root",
    ("registry.__main__", ("verify",), "export_dir"): "the export verified: read only",
    ("pipeline.to_onnx", (), "export_dir"): "the export converted: read only",
    ("pipeline.pilot", (), "staging"): "internal: the folder a torchrun worker's parent made (read only under RANK)",
}  # fmt: skip
T = "{TARGET}"
ARGV = {  # every output flag: the command line that writes it, T where the path goes
    ("gates.__main__", ("check",), "report"): ["check", "--report", T],
    ("gates.__main__", ("check",), "html"): ["check", "--html", T],
    ("gates.__main__", ("check",), "junit"): ["check", "--junit", T],
    ("gates.__main__", ("check",), "markdown"): ["check", "--markdown", T],
    ("gates.__main__", ("mutate",), "json"): ["mutate", "--only", "identity", "--json", T],
    ("gates.__main__", ("mutate",), "work"): ["mutate", "--only", "identity", "--work", T],
    ("gates.__main__", ("bisect",), "cache"): ["bisect", "HEAD", "HEAD", "--cache", T],
    ("registry.__main__", ("verify",), "report"): ["verify", "exports/pinned", "--report", T],
    ("pipeline.bench", (), "json"): ["--json", T],
    ("pipeline.busy_scaling", (), "out"): ["--runs", "1", "--out", T],
    ("pipeline.busy_scaling", (), "tree"): ["--runs", "1", "--tree", T],
    ("pipeline.closed_loop", (), "report"): ["--report", T],
    ("pipeline.corpus", (), "out"): ["--out", T],
    ("pipeline.env", (), "out"): ["--out", T],
    ("pipeline.repro", (), "out"): ["--no-pull", "--out", T],
    ("pipeline.export", (), "out_dir"): ["runs/single", T],
    ("pipeline.export", (), "out"): ["--out", T],
    ("pipeline.pilot", (), "out"): ["--out", T],
    ("pipeline.probes", (), "out"): ["--out", T],
    ("pipeline.scaling", (), "out"): ["--out", T],
    ("pipeline.to_onnx", (), "out"): ["exports/fresh", T],
    ("pipeline.tokenizer", (), "data"): ["--data", T],
    ("pipeline.train", (), "run_dir"): ["single", "--run-dir", T],
}


class Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parsers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, argparse.ArgumentParser]]:
    """Each command's parser, as its main() builds it (caught at parse_args: nothing runs)."""

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    found = []
    for module, argvs in COMMANDS.items():
        main = importlib.import_module(module).main
        for argv in argvs:
            with pytest.raises(Captured) as got:
                main(argv)
            found.append((module, got.value.parser))
    return found


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(subcommand path, action) of every value-taking flag or positional, subcommands included."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += walk(sub, (*path, name))
        elif action.nargs != 0 and not isinstance(action, argparse._HelpAction):
            out.append((path, action))
    return out


def flags(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[tuple, Any], list[tuple]]:
    """(output flags -> kind, output-sounding flags neither marked nor listed as inputs)."""
    outputs, unclassified = {}, []
    for module, parser in parsers(monkeypatch):
        for path, action in walk(parser, ("rank",) if parser.prog.endswith(" rank") else ()):
            key = (module, path, action.dest)
            if kind := getattr(action, "xtrain_output", None):
                outputs[key] = kind
            elif OUTPUTISH.search(f"{action.dest} {' '.join(action.option_strings)}") or WRITTEN.search(
                action.help or ""
            ):
                unclassified += [] if key in INPUTS else [key]
    return outputs, unclassified


def test_every_command_is_walked() -> None:
    mains = {f"pipeline.{p.stem}" for p in (REPO / "pipeline").glob("*.py") if "\ndef main(" in p.read_text()}
    assert mains <= set(COMMANDS), f"a command not walked for output flags: {sorted(mains - set(COMMANDS))}"


def test_every_output_flag_is_marked_and_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs, unclassified = flags(monkeypatch)
    assert not unclassified, (
        f"flags that sound like outputs: mark them (outputs.output_flag) or list them: {unclassified}"
    )
    assert set(outputs) == set(ARGV), (sorted(set(outputs) - set(ARGV)), sorted(set(ARGV) - set(outputs)))
    assert len(outputs) >= 22


def test_negative_control_an_unmarked_output_flag_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """An output flag added without the mark is named: the enumeration can fail."""
    from contracts import outputs

    mark = outputs.output_flag
    monkeypatch.setattr(
        outputs, "output_flag", lambda action, kind: action if action.dest == "junit" else mark(action, kind)
    )
    _, unclassified = flags(monkeypatch)
    assert unclassified == [("gates.__main__", ("check",), "junit")]


# -- each output flag against five targets ------------------------------------------------------------

TARGETS = {
    "params.yaml": "params.yaml",
    "a source file": "src/tool.py",
    "an empty source file git tracks": "pkg/__init__.py",
    "an unrelated folder": "notes",
    "a path through a link out of the repository": "elsewhere/new-output",
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guard") / "repo"
    outside = root.parent / "outside"
    for rel, text in {"params.yaml": PARAMS.read_text(), "src/tool.py": "print('mine')\n", "pkg/__init__.py": "",
                      "notes/todo.txt": "mine\n", "../outside/keep.txt": "theirs\n"}.items():  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "params.yaml", "src", "pkg", "notes"], cwd=root, check=True)
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every file under the repository and the folder its link leads to (not .git), by md5."""
    files = [p for top in (root, root.parent / "outside") for p in top.rglob("*") if ".git" not in p.parts]
    return {str(p): hashlib.md5(p.read_bytes()).hexdigest() if p.is_file() else "dir" for p in sorted(files)}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("flag", sorted(ARGV), ids=lambda k: f"{k[0].split('.')[-1]}:{'/'.join(k[1])}:{k[2]}")
def test_an_output_over_what_the_command_did_not_make_is_refused(
    repo: Path, flag: tuple, target: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(repo)
    path = TARGETS[target]
    argv = [path if a == T else a for a in ARGV[flag]]
    if flag[0] == "gates.__main__":
        argv = ["--root", ".", *argv]
    before = snapshot(repo)
    try:
        code = importlib.import_module(flag[0]).main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), (code, err)
    assert path in err[0] and "refusing to write" in err[0], err[0]
    assert snapshot(repo) == before
