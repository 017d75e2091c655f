"""The mutation catalogue (gates/campaigns/mutants.yaml): load, select, and apply a mutant's exact text edits.

A mutant is data: a list of edits (file, old snippet, new snippet) and the gates expected to catch
it. `old` must occur exactly once in its file; a one-line snippet matches anywhere in a line, a
multi-line one at any indentation (every line prefixed alike), and its replacement is indented the
same way. A snippet that no longer matches is an error naming the mutant and the file, so the
catalogue cannot silently drift from the code (tests/unit/test_mutate_catalogue.py applies every one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import yamlfile
from contracts.errors import XtrainError
from contracts.validate import ValidationError, load_schema, validate

CATALOGUE = Path(__file__).with_name("mutants.yaml")
CATALOGUE_BYTES = 4 << 20  # gates/campaigns/mutants.yaml is ~17 KB


class AnchorError(XtrainError):
    """A mutant's `old` snippet does not occur exactly once: the catalogue is out of step with the code."""

    exit_code = 2


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    id: str
    area: str
    what: str
    expect: list[str]
    edits: list[Edit]
    equivalent: bool = False  # equivalent by construction (the identity control)
    ci: bool = False


@dataclass(frozen=True)
class Catalogue:
    mutants: list[Mutant]
    profiles: dict[str, list[str]]
    skip_stages: list[str]
    skip_gates: list[str]
    timeout_s: int
    source: str = field(default=str(CATALOGUE))

    def select(self, only: list[str] | None, subset: str | None) -> list[Mutant]:
        """The mutants named by --only (in catalogue order), or the --subset, or all."""
        known = {m.id for m in self.mutants}
        unknown = sorted(set(only or []) - known)
        if unknown:
            raise ValidationError(
                self.source, "mutants", f"unknown mutant ids {unknown}", "an id in the catalogue"
            )
        picked = [m for m in self.mutants if not only or m.id in only]
        if subset == "ci":
            picked = [m for m in picked if m.ci]
        elif subset is not None:
            raise ValidationError("--subset", subset, "unknown subset", "ci")
        return picked


def load(path: Path = CATALOGUE) -> Catalogue:
    # bounded and strict (contracts/yamlfile.py): a regular file of at most 4 MiB, no aliases (a 740-byte
    # alias bomb hung the campaign), no duplicate ids by key, one reading of every scalar
    raw = yamlfile.load_file(path, hint="name the catalogue with --catalogue", limit=CATALOGUE_BYTES)
    validate(raw, load_schema("mutants.schema.json"), str(path))
    ids = [m["id"] for m in raw["mutants"]]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValidationError(str(path), "mutants", f"duplicate ids {dupes}", "unique ids")
    mutants = [_mutant(m) for m in raw["mutants"]]
    c = raw["campaign"]
    return Catalogue(mutants, raw["profiles"], c["skip_stages"], c["skip_gates"], c["timeout_s"], str(path))


def _mutant(m: dict[str, Any]) -> Mutant:
    edits = [Edit(e["file"], e["old"], e["new"]) for e in m["edits"]]
    return Mutant(
        m["id"],
        m["area"],
        m["what"],
        list(m["expect"]),
        edits,
        m.get("equivalent", False),
        m.get("ci", False),
    )


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def _locate(text: str, edit: Edit) -> tuple[str, str]:
    """(the exact old text found once in `text`, its replacement), or AnchorError."""
    if "\n" not in edit.old:
        return (edit.old, edit.new) if text.count(edit.old) == 1 else ("", "")
    hits = [w for w in range(41) if _indent(edit.old, " " * w) in text]
    found = [(w, text.count(_indent(edit.old, " " * w))) for w in hits]
    if len(found) != 1 or found[0][1] != 1:
        return "", ""
    pad = " " * found[0][0]
    return _indent(edit.old, pad), _indent(edit.new, pad)


def mutated_text(mutant: Mutant, root: Path) -> dict[str, str]:
    """Every file the mutant edits, with its edits applied (nothing is written)."""
    out: dict[str, str] = {}
    for edit in mutant.edits:
        path = root / edit.file
        text = out.get(edit.file)
        if text is None:
            try:
                text = path.read_text()
            except OSError as e:
                raise AnchorError(f"mutant {mutant.id}: cannot read {edit.file}: {e.strerror}") from None
        old, new = _locate(text, edit)
        if not old:
            n = text.count(edit.old)
            why = "anchor not found" if n == 0 else f"anchor found {n} times, expected once"
            raise AnchorError(f"mutant {mutant.id}: {why} in {edit.file}: {edit.old.splitlines()[0]!r}")
        out[edit.file] = text.replace(old, new)  # `old` occurs once: _locate counted it
    return out


def apply(mutant: Mutant, root: Path) -> list[str]:
    """Apply the mutant to the tree at `root` (a scratch copy); returns the files it changed."""
    texts = mutated_text(mutant, root)
    for rel, text in texts.items():
        (root / rel).write_text(text)
    return sorted(texts)
