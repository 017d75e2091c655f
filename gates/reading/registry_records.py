"""Registry entries as plain values for the judges: the golden a run is judged against (gates/reading/
goldens.py chooses it), the blessed version of the pinned export, the perf baseline of an environment;
each registry problem (a RegistryError) as a plain message the judge says as before.

Every registry file access of fresh_train, export_md5 and the perf gates happens here; the judges get
these records and their thresholds only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.perf_record import STAGES
from gates.reading import goldens
from gates.reading.artifacts import ArtifactError, Artifacts, StageNotRun
from gates.reading.expect import foreign_recorder
from registry.store import Entry, FileCheck, Registry, RegistryError, check_export


def registry_of(a: Artifacts) -> Registry:
    """The registry the gates judge against: registry/ of the judged tree."""
    return Registry(a.root / "registry")


def recorded(a: Artifacts, entry: Entry) -> str:
    """Record a registry entry as read (its md5 in the report); its path relative to the tree."""
    rel = str(entry.path.relative_to(a.root))
    a.record(rel, entry.path)
    return rel


# ---- fresh_train: the golden of a run ----------------------------------------------------------------


@dataclass(frozen=True)
class Golden:
    """The golden a run is judged against: its JSON and the choice's tier (goldens.Choice, plain)."""

    data: dict[str, Any]  # registry/goldens/<env_id>/v<N>.json
    version: int
    tier: str  # exact | approx
    cross_env: bool  # another environment's golden

    @property
    def name(self) -> str:
        return f"{self.data['env_id']} v{self.version}"


@dataclass(frozen=True)
class OwnGolden:
    """This environment's latest golden, blessed for another config (no golden of this config anywhere)."""

    version: int
    config_hash: str
    tier: str


@dataclass(frozen=True)
class GoldenChoice:
    """The registry's answer for one run: the golden (or why there is none, or the registry's problem)."""

    golden: Golden | None = None
    own: OwnGolden | None = None  # with golden None: this environment's golden of another config
    coverage: tuple[str, ...] = ()  # the golden's coverage problems against the run's config
    problem: str | None = None  # a RegistryError, said as the gate's error
    rel: str | None = None  # the golden's file, relative to the tree


def choose_golden(reg: Registry, m: dict[str, Any]) -> tuple[GoldenChoice, Entry | None]:
    """The golden (and its tier) this run is judged against, as plain values, and its registry entry."""
    env_id = m["env"]["env_id"]
    try:
        choice = goldens.choose(reg, env_id, m["config_hash"], m["device"], m["precision"])
        own = reg.golden(env_id) if choice is None else None  # pragma: no mutate -- equivalent: unused then
    except RegistryError as e:
        return GoldenChoice(problem=str(e)), None
    if choice is None:
        mine = None if own is None else OwnGolden(own.version, own.data["config_hash"], own.data["tier"])
        return GoldenChoice(own=mine), None
    e = choice.entry
    golden = Golden(e.data, e.version, choice.tier, choice.cross_env)
    return GoldenChoice(golden, coverage=golden_coverage(m, e.data)), e


def golden_coverage(m: dict[str, Any], golden: dict[str, Any]) -> tuple[str, ...]:
    """The golden's coverage problems for this run: our trainer's runs against the cadence their config
    implies, a loop of its own (runrecord) against the steps it evaluated at."""
    evaluated = [x["step"] for x in m["eval"]] if foreign_recorder(m) else None
    return tuple(goldens.coverage_problems(golden, m["config"]["train"], evaluated))


def golden_for(a: Artifacts, m: dict[str, Any]) -> GoldenChoice:
    """choose_golden on the judged tree's registry, the chosen golden's file recorded as read."""
    choice, entry = choose_golden(registry_of(a), m)
    if entry is None:
        return choice
    return GoldenChoice(choice.golden, coverage=choice.coverage, rel=recorded(a, entry))


# ---- export_md5: the blessed version of the pinned export ---------------------------------------------


@dataclass(frozen=True)
class PinnedExport:
    """exports/pinned against the version blessed for its model and dtype (registry verify's comparison)."""

    model: str
    version: int
    files: tuple[FileCheck, ...]
    source: FileCheck  # the checkpoint the export came from vs the one the version was blessed for


def pinned_problems(a: Artifacts, reg: Registry, model: str) -> list[str]:
    """The pinned checkpoint's files against the md5s its (sealed) pin.json recorded."""
    pin = reg.pin(model)
    out = []
    for name, key in (
        ("model.safetensors", "model_md5"),
        ("state.json", "state_md5"),
        ("tokenizer.json", "tokenizer_md5"),
    ):
        path = reg.pinned_dir(model) / name
        actual = a.record(str(path.relative_to(a.root)), path) if path.exists() else None
        if actual != pin[key]:
            out.append(
                f"registry/pinned/{model}/{name}: md5 {actual or '(absent)'}, pin.json recorded {pin[key]}"
            )
    return out


def blessed_export(
    a: Artifacts, reg: Registry, model: str, manifest: dict[str, Any], files: dict[str, str]
) -> tuple[PinnedExport | None, str | None]:
    """The export against its blessed version (that version's file recorded as read), or the registry's
    problem as a message."""
    try:
        result = check_export(reg, model, manifest, files)
    except RegistryError as e:
        return None, str(e)
    recorded(a, result.entry)
    return PinnedExport(model, result.entry.version, tuple(result.files), result.source), None


# ---- perf: the training stages and the baseline of their environment ---------------------------------


@dataclass(frozen=True)
class Baseline:
    """registry/baselines/<env_id>/v<N>.json as plain values."""

    env_id: str
    version: int
    stages: dict[str, Any]  # launcher -> the stage's record (contracts/perf_record.py stage_perf reads it)
    rel: str  # its file, relative to the tree


@dataclass(frozen=True)
class PerfRecords:
    """Every training stage's metrics that ran, notes for those that did not, and the baseline."""

    runs: dict[str, dict[str, Any]]
    notes: tuple[str, ...]
    baseline: Baseline | None = None
    # the registry's problem reading the baseline: the judge raises it where it looked before
    baseline_problem: str | None = None

    @property
    def env_id(self) -> str:
        """The first stage's environment (the baseline's), like goldens."""
        return next(iter(self.runs.values()))["env"]["env_id"]


def run_stages(a: Artifacts) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The metrics of every training stage that ran, and notes for those that did not."""
    runs, notes = {}, []
    for launcher, stage in STAGES.items():
        try:
            m = a.json(f"runs/{launcher}/metrics.json", "metrics.schema.json", stage)
        except StageNotRun as e:
            notes.append(f"{launcher}: {e}")
            continue
        if "perf" not in m:
            raise ArtifactError(
                f"runs/{launcher}/metrics.json: perf: missing (written before perf recording; "
                f"dvc repro -f {stage})"
            )
        runs[launcher] = m
    return runs, notes


def read_perf(a: Artifacts, t: dict[str, Any]) -> PerfRecords:
    """The perf gates' records: the stages, then (when one ran) the baseline of the first's environment."""
    runs, notes = run_stages(a)
    if not runs:
        return PerfRecords(runs, tuple(notes))
    env_id = next(iter(runs.values()))["env"]["env_id"]
    try:
        base = Registry(a.root / "registry").baseline(env_id)
    except RegistryError as e:
        return PerfRecords(runs, tuple(notes), baseline_problem=str(e))
    if base is None:
        return PerfRecords(runs, tuple(notes))
    rel = str(base.path.relative_to(a.root))
    return PerfRecords(runs, tuple(notes), Baseline(env_id, base.version, base.data["stages"], rel))
