"""The README is a page for users (issue #35 item 4): at most 150 lines, every docs/ page it names
exists, every command it shows works from a fresh clone (the script is there and executable, the
module is importable, the subcommand is one its --help lists), and CI's `.ci/run` runs exactly the
test command it gives. Torch-free. Each check is a function of the README's text, so the negative
controls below hand it a broken text and see it fail.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, code_first

MAX_LINES = 150
DOC = re.compile(r"docs/[\w./-]+?\.md\b")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
COMMAND_START = ("python3 -m ", "python -m ", "ci/", "dvc ")


def length_problems(text: str) -> list[str]:
    n = len(text.splitlines())
    return [f"README.md: {n} lines, more than {MAX_LINES}"] if n > MAX_LINES else []


def doc_problems(text: str, root: Path) -> list[str]:
    """Every docs/*.md the README names (as a link or as text) exists."""
    return [
        f"README.md: {doc} does not exist"
        for doc in sorted(set(DOC.findall(text)))
        if not (root / doc).is_file()
    ]


def block_commands(text: str) -> list[list[str]]:
    """Each line of the README's bash blocks, its comment cut off (the Python block is code)."""
    lines = [ln for lang, body in FENCE.findall(text) if lang == "bash" for ln in body.splitlines()]
    return [argv for ln in lines if (argv := shlex.split(ln, comments=True))]


def commands(text: str) -> list[list[str]]:
    """The commands the README shows: its bash blocks' lines and each inline code span of its prose
    that starts like a command."""
    spans = [span for span in SPAN.findall(FENCE.sub("", text)) if span.startswith(COMMAND_START)]
    return block_commands(text) + [shlex.split(span) for span in spans]


def path_problems(argvs: list[list[str]], root: Path) -> list[str]:
    """A script a command runs (ci/...) exists and is executable; any other program is on PATH."""
    problems = []
    for argv in argvs:
        program = argv[0]
        if "/" in program:
            path = root / program
            if not path.is_file() or not os.access(path, os.X_OK):
                problems.append(f"README.md: {program}: not an executable file")
        elif program not in ("python3", "python") and shutil.which(program) is None:
            problems.append(f"README.md: {program}: not on PATH")
    return problems


def module_calls(argvs: list[list[str]]) -> list[tuple[str, str | None]]:
    """(module, first argument unless an option) of every `python -m MODULE ...`."""
    calls = []
    for argv in argvs:
        if argv[0] in ("python3", "python") and len(argv) > 2 and argv[1] == "-m":
            sub = argv[3] if len(argv) > 3 and not argv[3].startswith("-") else None
            calls.append((argv[2], sub))
    return calls


def run_code(*argv: str) -> subprocess.CompletedProcess:
    """A Python of this checkout's code, as a user's shell in the repository root would run it."""
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO, env=code_first(REPO), capture_output=True, text=True, timeout=120
    )


def missing_modules(modules: list[str]) -> list[str]:
    probe = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    importlib.util.find_spec(m) or print(m)"
    return run_code("-c", probe, *modules).stdout.split()


@functools.cache
def subcommands(module: str) -> frozenset[str] | None:
    """The subcommands `python -m MODULE --help` lists ({a,b,c}), or None for a module without."""
    out = run_code("-m", module, "--help")
    assert out.returncode == 0, f"python -m {module} --help: exit {out.returncode}\n{out.stderr[-2000:]}"
    found = re.search(r"\{([\w,-]+)\}", out.stdout)
    return frozenset(found.group(1).split(",")) if found else None


def module_problems(argvs: list[list[str]]) -> list[str]:
    calls = module_calls(argvs)
    missing = missing_modules(sorted({m for m, _ in calls}))
    problems = [f"README.md: python -m {m}: no such module" for m in missing]
    for module, sub in calls:
        if module in missing or sub is None:
            continue
        known = subcommands(module)
        if known is not None and sub not in known:
            problems.append(
                f"README.md: python -m {module} {sub}: not a subcommand ({', '.join(sorted(known))})"
            )
    return problems


def ci_run_commands(root: Path) -> list[str]:
    """What `.ci/run` executes: its lines but comments, blanks, `set` and `cd`."""
    lines = (ln.strip() for ln in (root / ".ci" / "run").read_text().splitlines())
    return [ln for ln in lines if ln and not ln.startswith(("#", "set ", "cd "))]


def ci_run_problems(text: str, root: Path) -> list[str]:
    """`.ci/run` runs one command, and a bash block of the README (the quick start) shows it verbatim."""
    run = ci_run_commands(root)
    if len(run) != 1:
        return [f".ci/run: runs {len(run)} commands, expected one: {run}"]
    shown = [shlex.join(argv) for argv in block_commands(text)]
    return [] if run[0] in shown else [f"README.md: does not show .ci/run's command {run[0]!r}"]


def readme_problems(text: str, root: Path = REPO) -> list[str]:
    argvs = commands(text)
    return [
        *length_problems(text),
        *doc_problems(text, root),
        *path_problems(argvs, root),
        *module_problems(argvs),
        *ci_run_problems(text, root),
    ]


def test_the_readme_is_short_and_every_link_and_command_works() -> None:
    text = (REPO / "README.md").read_text()
    assert readme_problems(text) == []
    shown = {argv[0] for argv in commands(text)}
    assert {"ci/main.sh", "ci/test.sh"} <= shown  # the two commands of the quick start are seen
    assert ("gates", "check") in module_calls(commands(text))


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    assert ci_run_commands(REPO) == ["ci/test.sh"]


GOOD = """# t

```bash
ci/main.sh    # the main job
ci/test.sh    # the tests
```

See [gates](docs/gates.md); `python3 -m gates check` and `python3 -m registry bless --golden --reason "why"`.
"""


def test_a_good_text_passes_so_the_controls_below_fail_for_their_one_fault() -> None:
    assert readme_problems(GOOD) == []


def test_negative_controls_each_fault_is_named() -> None:
    assert readme_problems(GOOD + "\n" * (MAX_LINES - len(GOOD.splitlines()) + 1)) == [
        "README.md: 151 lines, more than 150"
    ]
    assert readme_problems(GOOD + "[x](docs/no-such-page.md)\n") == [
        "README.md: docs/no-such-page.md does not exist"
    ]
    assert readme_problems(GOOD + "`ci/no-such.sh`\n") == ["README.md: ci/no-such.sh: not an executable file"]
    assert readme_problems(GOOD + "`python3 -m no_such_module run`\n") == [
        "README.md: python -m no_such_module: no such module"
    ]
    (wrong,) = readme_problems(GOOD + "`python3 -m gates frobnicate`\n")
    assert wrong.startswith("README.md: python -m gates frobnicate: not a subcommand (bisect, check,")
    assert readme_problems(GOOD.replace("ci/test.sh    # the tests\n", "")) == [
        "README.md: does not show .ci/run's command 'ci/test.sh'"
    ]


def test_negative_control_a_script_that_is_not_executable(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "main.sh").write_text("#!/bin/sh\n")
    assert path_problems([["ci/main.sh"]], tmp_path) == ["README.md: ci/main.sh: not an executable file"]
    (tmp_path / "ci" / "main.sh").chmod(0o755)
    assert path_problems([["ci/main.sh"]], tmp_path) == []
