"""House rules of issue #26 item 3 (beside tests/process/test_house.py, whose helpers they reuse): a gate is one unit.

- no module in gates/ imports a private name (`_x`) of another project module, nor reads one as an
  attribute of an imported module (`export_md5._registry`): a picture uses its gate's public functions;
- every gate of the catalogue is defined, with its picture, in its own module; catalogue.py only
  collects them (it constructs no Gate);
- the tolerance keys of params.yaml (first_step_rtol, prefix_steps, final_val_atol, loss_rtol,
  max_steps_out, eval_rtol) are read only where gates/judges/tolerance.py objects are built from them
  (ddp.tier_for, fresh_train.ApproxTier.of): no picture or message re-derives a tier rule;
- the `gates:` sections a gate says it takes are the sections thresholds.schema.json defines, and
  every section is taken by some gate;
- `python -m gates check` without --html imports no matplotlib (the pictures import it when drawn).

Each checker is a function of a source string or of gate objects, and each has a negative control.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys

import pytest

from conftest import REPO
from gates.judges import catalogue, pictures, training
from gates.judges.gate import Gate
from test_house import parse, rel, sources

PROJECT = ("contracts", "xtrain", "gates", "registry", "pipeline", "runrecord", "params")
TOLERANCE_KEYS = {
    "first_step_rtol",
    "prefix_steps",
    "final_val_atol",
    "loss_rtol",
    "max_steps_out",
    "eval_rtol",
}
BUILDERS = {
    ("gates/judges/ddp.py", "tier_for"),
    ("gates/judges/fresh_train.py", "of"),
    ("gates/reporting/threshold_docs.py", "capped"),  # the docs' tiers as a run is judged: prefix capped
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(tree: ast.AST) -> list[str]:
    """`line: what` for each private name imported from, or read off, another project module."""
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
            for a in node.names:
                if _private(a.name):
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
                else:  # `from gates.judges import export_md5`: maybe a module (rooms hold modules)
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.split(".")[0] in PROJECT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = ast.unparse(node.value)
            if base in modules:
                found.append(f"{node.lineno}: {base}.{node.attr}")
    return found


def tolerance_key_reads(tree: ast.AST, path: str) -> list[str]:
    """`line: key in function` for each tolerance key read outside the functions that build tolerances."""
    found = []

    def visit(node: ast.AST, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else fn
            if (
                isinstance(child, ast.Constant)
                and child.value in TOLERANCE_KEYS
                and (path, fn) not in BUILDERS
            ):
                found.append(f"{child.lineno}: {child.value!r} in {fn or '<module>'}")
            visit(child, name)

    visit(tree, "")
    return found


def gates_constructed(tree: ast.AST) -> list[str]:
    """`line` of each Gate(...) call: a catalogue that writes gate text itself."""
    return [
        f"{node.lineno}: Gate(...)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Gate"
    ]


def unit_problems(gates: list[Gate]) -> list[str]:
    """Gates whose picture is not drawn in the module that defines the gate (its `judge`)."""
    out = []
    for g in gates:
        home, drawn = g.judge.__module__, getattr(g.picture, "__module__", None)
        if home in ("gates.judges.catalogue", "gates.judges.pictures", "gates.judges.gate") or drawn != home:
            out.append(f"{g.id}: judged in {home}, drawn in {drawn}")
    return out


def schema_sections() -> set[str]:
    schema = json.loads((REPO / "contracts/schemas/thresholds.schema.json").read_text())
    return set(schema["properties"])


def takes_problems(gates: list[Gate], sections: set[str]) -> list[str]:
    taken = {s for g in gates for s in g.takes}
    unknown = [f"{g.id} takes {s}: not a section" for g in gates for s in g.takes if s not in sections]
    return unknown + [f"section {s} is taken by no gate" for s in sorted(sections - taken)]


# ---- the rules over the tree ---------------------------------------------------------------------


def test_no_gates_module_imports_a_private_name() -> None:
    bad = {rel(p): found for p in sources(("gates",)) if (found := private_imports(parse(p)))}
    assert not bad, f"private names used across modules (make them public): {bad}"


def test_every_gate_is_one_unit_with_its_picture() -> None:
    assert len(catalogue.GATES) >= 15 and not unit_problems(catalogue.GATES)
    assert not gates_constructed(parse(REPO / "gates/judges/catalogue.py")), (
        "catalogue.py writes a gate itself"
    )
    assert {g.judge.__module__ for g in catalogue.GATES} >= {
        "gates.judges.ddp",
        "gates.judges.training",
        "gates.judges.pilot",
    }


def test_tolerance_keys_are_read_only_where_tolerances_are_built() -> None:
    bad = {rel(p): found for p in sources(("gates",)) if (found := tolerance_key_reads(parse(p), rel(p)))}
    assert not bad, f"a tolerance key read outside {sorted(BUILDERS)}: {bad}"
    built = {k for p, _ in BUILDERS for k in TOLERANCE_KEYS if f'"{k}"' in (REPO / p).read_text()}
    assert built == TOLERANCE_KEYS  # positive control: the builders do read every key


def test_the_gates_take_exactly_the_schema_sections() -> None:
    assert not takes_problems(catalogue.GATES, schema_sections())


def test_the_check_imports_no_matplotlib() -> None:
    code = "import sys, {}; print('matplotlib' in sys.modules)"
    run = [sys.executable, "-c"]
    check = subprocess.run([*run, code.format("gates.__main__")], cwd=REPO, capture_output=True, text=True)
    page = subprocess.run(
        [*run, code.format("gates.judges.pictures")], cwd=REPO, capture_output=True, text=True
    )
    assert check.stdout.strip() == "False", check.stderr
    assert page.stdout.strip() == "True", page.stderr  # negative control: drawing does import it


# ---- negative controls: each checker catches a synthetic violation --------------------------------

PRIVATE_CASES = {
    "from module": "from gates.judges.export_md5 import MANIFEST, _manifest\n",
    "module attribute": "from gates.judges import export_md5\n\ndef f(a):\n    return export_md5._registry(a)\n",
    "aliased module": "import gates.judges.export_md5 as em\nem._registry(None)\n",
}


@pytest.mark.parametrize("case", sorted(PRIVATE_CASES))
def test_the_private_import_check_catches(case: str) -> None:
    assert private_imports(ast.parse(PRIVATE_CASES[case]))


def test_the_private_import_check_lets_public_names_pass() -> None:
    src = (
        "from __future__ import annotations\nfrom gates.judges import export_md5\nfrom gates.judges.ddp import tier_for\n"
        "import numpy as np\nclass C:\n    def f(self):\n        return self._x, np._NoValue, export_md5.__name__\n"
    )
    assert private_imports(ast.parse(src)) == []


def test_the_unit_check_catches_a_picture_drawn_elsewhere() -> None:
    moved = dataclasses.replace(training.FINITE, picture=pictures.md5_table)
    assert unit_problems([moved]) == [
        "finite: judged in gates.judges.training, drawn in gates.judges.pictures"
    ]
    assert gates_constructed(ast.parse("GATES = [Gate(id='x', checks='y')]\n")) == ["1: Gate(...)"]


def test_the_tolerance_key_check_catches_a_rederived_rule() -> None:
    src = "def picture(a, t):\n    tol = t['fresh_train']['approx']['cpu']\n    return tol.get('prefix_steps')\n"
    assert tolerance_key_reads(ast.parse(src), "gates/judges/fresh_train.py") == [
        "3: 'prefix_steps' in picture"
    ]
    assert (
        tolerance_key_reads(
            ast.parse("def of(t):\n    return t['loss_rtol']\n"), "gates/judges/fresh_train.py"
        )
        == []
    )


def test_the_takes_check_catches_an_unknown_or_untaken_section() -> None:
    odd = dataclasses.replace(training.FINITE, takes=("no_such_section",))
    assert takes_problems([odd], {"cross_rank"}) == [
        "finite takes no_such_section: not a section",
        "section cross_rank is taken by no gate",
    ]
