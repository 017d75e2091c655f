"""An existing repository with a trainer of its own, and docs/byo-trainer.md's "An existing repository:
three commands" (issue #54 item 4): the commands and the recording lines as the docs list them, the
trainer before those lines were added, and a repository to run the commands in. Shared by
tests/pipeline/test_scaffold.py (the count, end to end) and tests/init_existing_cost.py (the time).

The trainer is examples/plain-loop/train.py as it is; "before" is the same file without the listed
lines (matched by their code, the part before a `  #` comment) and without its comment-only lines
about runrecord (comments are not counted).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "byo-trainer.md"
TRAINER = REPO / "examples" / "plain-loop" / "train.py"
SECTION = "## An existing repository: three commands"
VOCAB = 64


def section() -> str:
    text = DOC.read_text()
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def commands() -> list[str]:
    """The section's first bash block: one command a line (comments and blank lines aside); a line
    chaining commands with && or ; counts each."""
    block = re.search(r"```bash\n(.*?)```", section(), re.S).group(1)
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [part.strip() for line in lines if line for part in re.split(r"&&|;", line)]


def recording_lines() -> list[str]:
    """The section's first python block: the lines a user adds to the trainer (code only)."""
    block = re.search(r"```python\n(.*?)```", section(), re.S).group(1)
    return [code for line in block.splitlines() if (code := _code(line))]


def _code(line: str) -> str:
    return line.split("  #", 1)[0].strip() if not line.strip().startswith("#") else ""


def before(recorded: str, lines: list[str]) -> str:
    """`recorded` without `lines` (each removed once, matched by its code) and without comment-only
    lines about runrecord; a listed line the trainer does not have is an error."""
    todo = list(lines)
    kept = []
    for line in recorded.splitlines(keepends=True):
        code = _code(line)
        if code and code in todo:
            todo.remove(code)
        elif not (line.strip().startswith("#") and "runrecord" in line):
            kept.append(line)
    assert not todo, f"listed in {DOC.name} but not in {TRAINER}: {todo}"
    return "".join(kept)


def records(source: str) -> list[str]:
    """What of runrecord the code uses: an import of it, the names `rec` and `RunRecorder`."""
    used = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in ("rec", "RunRecorder"):
            used.append(node.id)
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "runrecord" for a in node.names):
            used.append("import runrecord")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "runrecord":
            used.append("from runrecord import")
    return used


def make_repo(folder: Path, trainer: str) -> None:
    """`folder`: a git repository, one commit, holding `trainer` as train.py and its data."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(trainer)
    gen = torch.Generator().manual_seed(0)
    tokens = {
        "train": torch.randint(0, VOCAB, (4096,), generator=gen),
        "val": torch.randint(0, VOCAB, (512,), generator=gen),
    }
    save_file(tokens, str(folder / "tokens.safetensors"))
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@localhost"]
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "my trainer"]):
        subprocess.run(argv, cwd=folder, check=True, capture_output=True)
