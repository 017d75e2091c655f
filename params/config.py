"""params.yaml -> validated, typed configuration (torch-free).

Order of precedence: params.yaml < profiles.<profile> < --set overrides. The merged result is
validated against contracts/schemas/params.schema.json and then against the cross-field rules
below; any problem is one line naming the file, the key and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts import lockfile, yamlfile
from contracts.errors import moved
from contracts.fileio import atomic_write_text
from contracts.validate import ValidationError, load_schema, validate
from params.identity import config_identity

DEFAULT_PARAMS = "params.yaml"
# A params file with either section describes runs: it is our pipeline's (params.schema.json), and the
# gates hold every run to it. Any other file is a project's own (params/project.py).
RUN_SECTIONS = ("model", "train")


def describes_runs(raw: Any) -> bool:
    """Whether a loaded params file describes the runs (our schema) or is a project's own file."""
    return isinstance(raw, dict) and any(key in raw for key in RUN_SECTIONS)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_seq_len: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    recompute: bool = False
    init_std: float = 0.02

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings: every field required, so params.yaml `train:` is the one place values live."""

    device: str
    precision: str
    seq_len: int
    global_batch: int
    grad_accum: int
    steps: int
    lr: float
    min_lr: float
    warmup_steps: int
    weight_decay: float
    beta1: float
    beta2: float
    adam_eps: float
    grad_clip: float
    eval_every: int
    eval_batches: int
    ckpt_every: int
    keep_checkpoints: int
    log_every: int
    cpu_threads: int
    deterministic: bool
    compile: bool
    compile_mode: str
    fused_adamw: bool


@dataclass(frozen=True)
class RunConfig:
    """What one training run needs: the seed, the model and the optimisation settings."""

    seed: int
    model: ModelConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "model": self.model.to_dict(), "train": dataclasses.asdict(self.train)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        """The inverse of to_dict (a resolved run read back from JSON: the same values, the same hash)."""
        return cls(seed=d["seed"], model=ModelConfig(**d["model"]), train=TrainConfig(**d["train"]))

    def config_hash(self) -> str:
        """Hash of everything that determines the numbers a run produces (params/identity.py)."""
        return config_identity(self.to_dict())


@dataclass(frozen=True)
class LaunchConfig:
    """How ranks start and talk: params.yaml `launchers:`."""

    thread_world: int
    proc_world: int
    timeout_s: float
    grad_sync: str


@dataclass(frozen=True)
class ScalingConfig:
    """The scaling benchmark: params.yaml `scaling:`."""

    worlds: list[int]
    launchers: list[str]
    per_rank_batch: int
    warmup_steps: int
    window_steps: int
    windows: int
    max_rounds: int = 1  # rounds of `windows` windows while a measurement is noisy (docs/scaling.md)
    time_cap_s: float = 0.0  # no round that would end later than this after the measurement began


@dataclass(frozen=True)
class Params:
    """The resolved params.yaml (profile and overrides applied, validated)."""

    raw: dict[str, Any]
    source: str
    defaults: tuple[str, ...] = ()  # gates: sections a project's own file took from the harness (project.py)
    # each pilot cell's params (pilot_cells.cell_params), resolved once per Params (raw is never edited;
    # init=False: a dataclasses.replace() copy starts with its own)
    resolved_cells: dict[str, Params] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def lookup(self, key: str) -> Any:
        """The resolved value at a dotted key, e.g. `export.dtype`."""
        node: Any = self.raw
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ValidationError(self.source, key, "unknown key")
            node = node[part]
        return node

    @property
    def describes_runs(self) -> bool:
        """params.yaml of our pipeline (model/train present): runs must also agree with it."""
        return describes_runs(self.raw)

    @property
    def thresholds(self) -> dict[str, Any]:
        """params.yaml `gates:`, validated against thresholds.schema.json when these params were resolved."""
        return self.raw["gates"]

    def world(self, launcher: str) -> int:
        """The ranks a run of this launcher has: single is 1, the others launchers.<launcher>.world."""
        return 1 if launcher == "single" else self.raw["launchers"][launcher]["world"]

    def worlds(self) -> dict[str, int]:
        """Each launcher's world as the launchers use it: the one route (docs/world-sizes.md)."""
        return {launcher: self.world(launcher) for launcher in ("thread", "proc")}

    def launch_config(self) -> LaunchConfig:
        la = self.raw["launchers"]
        return LaunchConfig(la["thread"]["world"], la["proc"]["world"], la["timeout_s"], la["grad_sync"])

    def scaling_config(self) -> ScalingConfig:
        return ScalingConfig(**{k: v for k, v in self.raw["scaling"].items() if k != "sets"})

    def scaling_workload(self) -> Params:
        """The params the scaling benchmark trains with: scaling.sets.<profile> on top. The gated runs
        are sized by the gates' power; a speedup needs steps long enough to hide a step's fixed costs."""
        sets = self.raw["scaling"].get("sets", {}).get(self.raw["profile"])  # None: none given
        return (
            resolve(self.raw, f"{self.source} (scaling.sets.{self.raw['profile']})", sets) if sets else self
        )

    def run_config(self, vocab_size: int) -> RunConfig:
        """The run's configuration; the vocabulary comes from the trained tokenizer, not from params."""
        model = ModelConfig(vocab_size=vocab_size, **self.raw["model"])
        return RunConfig(seed=self.raw["seed"], model=model, train=TrainConfig(**self.raw["train"]))


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _partial(schema: Any) -> Any:
    """The same schema with every `required` dropped: what a profile override must satisfy."""
    if isinstance(schema, dict):
        return {k: _partial(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [_partial(v) for v in schema]
    return schema


def parse_override(text: str, source: str = "--set") -> tuple[list[str], Any]:
    if "=" not in text:
        raise ValidationError(source, text, "expected KEY=VALUE", "e.g. train.steps=20")
    key, value = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ValidationError(source, key, "empty key segment", "dotted key such as train.steps")
    if why := yamlfile.ambiguity(value.strip()):  # `040`: 32 to YAML 1.1, 40 to DVC: never guessed
        raise ValidationError(source, key.strip(), why)
    try:  # read as DVC reads `dvc exp run -S` (YAML 1.2): `1e-3` is the float
        parsed = yamlfile.loads(value) if value.strip() else None
    except yaml.YAMLError:  # an alias or other refused YAML stays a string: the schema then refuses it
        parsed = value
    if isinstance(parsed, str) and parsed.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        parsed = float(parsed)  # refused either way; named as what a user meant: "not a finite number"
    return parts, parsed


def set_path(d: dict[str, Any], parts: list[str], value: Any, source: str) -> None:
    node = d
    for i, p in enumerate(parts[:-1]):
        if not isinstance(node.get(p), dict):
            known = ", ".join(sorted(node)) if isinstance(node, dict) else ""
            raise ValidationError(source, ".".join(parts[: i + 1]), "unknown key", f"known keys: {known}")
        node = node[p]
    if parts[-1] not in node and parts[0] not in ("profiles",):
        raise ValidationError(
            source, ".".join(parts), "unknown key", "known keys: " + ", ".join(sorted(node))
        )
    node[parts[-1]] = value


WORLD_RULE = "an integer >= 1 dividing train.global_batch/train.grad_accum"


def splits_batch(global_batch: int, grad_accum: int, world: int) -> bool:
    """The one rule of the batch split: each of `world` ranks takes global_batch / (grad_accum * world)
    rows per micro-batch, so grad_accum * world must divide global_batch."""
    return world >= 1 and global_batch % (grad_accum * world) == 0


def split_problem(global_batch: int, grad_accum: int, world: int) -> str:
    return f"{world} ranks cannot split train.global_batch={global_batch} with train.grad_accum={grad_accum}"


def check_cross_fields(p: dict[str, Any], source: str) -> None:
    """Rules JSON Schema cannot state: relations between keys."""
    m, t = p["model"], p["train"]

    def bad(key: str, problem: str, rule: str) -> None:
        raise ValidationError(source, key, problem, rule)

    if m["dim"] % m["n_heads"]:
        bad("model.n_heads", f"{m['n_heads']} does not divide model.dim={m['dim']}", "a divisor of model.dim")
    if m["n_heads"] % m["n_kv_heads"]:
        bad(
            "model.n_kv_heads",
            f"{m['n_kv_heads']} does not divide model.n_heads={m['n_heads']}",
            "a divisor of model.n_heads (grouped-query attention)",
        )
    if (m["dim"] // m["n_heads"]) % 2:
        bad(
            "model.n_heads",
            f"head_dim = {m['dim']}/{m['n_heads']} is odd",
            "an even head_dim (RoPE rotates pairs)",
        )
    if t["seq_len"] > m["max_seq_len"]:
        bad(
            "train.seq_len",
            f"{t['seq_len']} exceeds model.max_seq_len={m['max_seq_len']}",
            "<= model.max_seq_len",
        )
    if t["global_batch"] % t["grad_accum"]:
        bad(
            "train.grad_accum",
            f"{t['grad_accum']} does not divide train.global_batch={t['global_batch']}",
            "a divisor of train.global_batch",
        )
    if t["min_lr"] > t["lr"]:
        bad("train.min_lr", f"{t['min_lr']} is above train.lr={t['lr']}", "<= train.lr")
    if t["warmup_steps"] > t["steps"]:
        bad(
            "train.warmup_steps",
            f"{t['warmup_steps']} is more than train.steps={t['steps']}",
            "<= train.steps",
        )
    if t["precision"] == "bf16" and t["device"] != "cuda":
        bad("train.precision", "bf16 needs train.device=cuda", "fp32 on cpu")
    # fused AdamW runs on cpu too (torch >= 2.4); the pilot's fused_adamw cell trains it there
    check_data(p["data"], source)
    for launcher in ("thread", "proc"):
        world = p["launchers"][launcher]["world"]
        if not splits_batch(t["global_batch"], t["grad_accum"], world):
            bad(
                f"launchers.{launcher}.world",
                split_problem(t["global_batch"], t["grad_accum"], world),
                WORLD_RULE,
            )


def check_data(d: dict[str, Any], source: str) -> None:
    """data: a file source names its file (the rule JSON Schema cannot state)."""
    if d["source"] == "file" and not d["path"]:
        raise ValidationError(
            source, "data.path", "data.source is 'file' but no path is given", "a path to a UTF-8 text file"
        )


def check_world(t: TrainConfig, world: int, source: str) -> None:
    """Refuse a world that cannot split the batch (a --world or torchrun's WORLD_SIZE), before anything is touched."""
    if not splits_batch(t.global_batch, t.grad_accum, world):
        raise ValidationError(source, "", split_problem(t.global_batch, t.grad_accum, world), WORLD_RULE)


def _refuse_profile_worlds(name: str, section: str, body: Any, source: str) -> None:
    """World sizes have one route, the top-level keys: `config set`, `--set` and `dvc exp run -S`
    all write there, so a profile that set them would silently win over all three (docs/world-sizes.md)."""
    for launcher in ("thread", "proc"):
        if section == "launchers" and "world" in (body.get(launcher) or {}):
            raise ValidationError(
                source,
                f"profiles.{name}.launchers.{launcher}.world",
                "a profile may not set a world size",
                f"set launchers.{launcher}.world at the top level (python -m pipeline.config set launchers.{launcher}.world=N)",
            )


def check_thresholds(gates: Any, source: str) -> dict[str, Any]:
    """params.yaml `gates:` against thresholds.schema.json, strict (a NaN or infinite tolerance passes
    everything); errors name the key from the top of the file (`gates.loss_match.max_rel`)."""
    try:
        validate(gates, load_schema("thresholds.schema.json"), source, strict=True)
    except ValidationError as e:
        key = f"gates.{e.key}" if e.key and e.key != "(top level)" else "gates"
        raise ValidationError(source, key, e.problem, e.rule, e.hint) from None
    return gates


def resolve(raw: dict[str, Any], source: str, overrides: list[str] | tuple[str, ...] = ()) -> Params:
    """Apply the profile and overrides to a loaded params dict, validate, and return Params."""
    schema = load_schema("params.schema.json")
    if not isinstance(raw, dict):
        raise ValidationError(source, "", "expected a mapping at the top level", "a YAML mapping")
    raw = copy.deepcopy(raw)
    for text in overrides:  # overrides first, so `--set profile=gpu` selects the profile
        parts, value = parse_override(text)
        set_path(raw, parts, value, f"{source} (--set {text})")
    validate(raw, schema, source, strict=True)
    partial = _partial(schema)
    for name, over in raw["profiles"].items():
        for section, body in over.items():
            sub = partial["properties"].get(section)
            # only a section with its own $defs entry may be overridden per profile (not profile,
            # profiles, seed, gates, pilot)
            if sub is None or section not in partial["$defs"]:
                raise ValidationError(
                    source,
                    f"profiles.{name}.{section}",
                    "unknown or unsupported section",
                    "one of data, tokenizer, model, train, launchers, export, closed_loop, scaling",
                )
            section_schema = {**partial, **partial["$defs"][section]}
            validate(body, section_schema, f"{source} (profiles.{name}.{section})", strict=True)
            _refuse_profile_worlds(name, section, body, source)
    if raw["profile"] not in raw["profiles"]:
        raise ValidationError(
            source,
            "profile",
            f"{raw['profile']!r} is not defined",
            "one of " + ", ".join(sorted(raw["profiles"])),
        )
    merged = _deep_merge(raw, raw["profiles"][raw["profile"]])
    # Overrides win over the profile too (profile and profiles keys again: the same values as above).
    for text in overrides:
        parts, value = parse_override(text)
        # the same path was set on raw above without error, so this one cannot fail: its message is unseen
        set_path(merged, parts, value, f"{source} (--set {text})")  # pragma: no mutate -- equivalent
    # a guard for when the schema grows oneOf/anyOf: today raw passed it whole and each profile section
    # its part without `required`, so their merge cannot fail it
    validate(merged, schema, source, strict=True)  # pragma: no mutate -- equivalent (comment above)
    check_cross_fields(merged, source)
    # The gates' thresholds too: a run or `config show` must not accept what `gates check` refuses.
    check_thresholds(merged["gates"], source)
    return Params(raw=merged, source=source)


def load_params(path: str | Path = DEFAULT_PARAMS, overrides: list[str] | tuple[str, ...] = ()) -> Params:
    """THE loader of params.yaml: every reader (the trainer's entry points, gates, registry) comes here."""
    path = str(path)
    # Strict and bounded: a regular UTF-8 file <= 1 MiB, no aliases, no duplicate keys (contracts/yamlfile.py).
    raw = yamlfile.load_file(path, hint="run from the repository root or pass --params")
    return resolve(raw, path, overrides)


def load_thresholds(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    """The gates' thresholds (params.yaml `gates:`), read and validated with the rest of the file."""
    return load_params(path).thresholds


def _check_edit_takes_effect(raw: dict[str, Any], source: str, overrides: list[str]) -> None:
    """Validate the file as it will be written, and refuse an edit the active profile would shadow."""
    edited = copy.deepcopy(raw)
    for text in overrides:
        parts, value = parse_override(text)
        set_path(edited, parts, value, f"{source} (set {text})")
    merged = resolve(edited, source).raw
    for text in overrides:  # `profile` and `profiles.*` are kept as edited: they compare equal
        parts, value = parse_override(text)
        node: Any = merged
        for p in parts:
            node = node[p]
        if node != value:
            shadow = f"profiles.{merged['profile']}.{'.'.join(parts)}"
            raise ValidationError(
                source, ".".join(parts), f"the active profile sets it ({shadow}={node!r})", f"edit {shadow}"
            )


def _round_trip() -> Any:
    """ruamel's round-trip YAML: DVC's dialect (1.2), comments and layout kept: the one writer of params files."""
    from ruamel.yaml import YAML
    from ruamel.yaml.representer import RoundTripRepresenter

    class NullWriting(RoundTripRepresenter):  # its own table: add_representer edits the class it is called on
        pass

    NullWriting.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    ry = YAML()
    ry.Representer = NullWriting
    ry.preserve_quotes = True
    return ry


def _dump(doc: Any) -> str:
    buf = io.StringIO()
    _round_trip().dump(doc, buf)
    return buf.getvalue()


def set_in_file(path: str | Path, overrides: list[str]) -> None:
    """Validate `overrides` against the file, then write them into it, comments kept; under the file's
    lock (contracts/lockfile.py), so a second writer reads what the first wrote, never the file before
    it (two `config set` at once lost one value, 12 tries of 12)."""
    path = Path(path)
    yamlfile.load_file(path)  # a missing or unreadable file is named as such, before any lock is made
    with lockfile.held(path.resolve(), "python -m pipeline.config set"):
        _set_in_file(path, overrides)


def _set_in_file(path: Path, overrides: list[str]) -> None:
    raw = yamlfile.load_file(path)
    _check_edit_takes_effect(raw, str(path), overrides)  # refuse before touching the file
    # text, not the path: ruamel would keep a CRLF file's \r
    content = path.read_text(encoding="utf-8")  # pragma: no mutate -- equivalent: also the locale's
    doc = _round_trip().load(content)
    for text in overrides:
        parts, value = parse_override(text)
        node = doc
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = value
    # through a symbolic link: the file it names is edited, the link stays a link
    atomic_write_text(path.resolve(), _dump(doc))


def write_with_section(source: str | Path, dest: str | Path, section: str, value: Any) -> None:
    """`source` (read as load_params reads it: bounded, one dialect) with its top-level `section`
    replaced by `value`, written to `dest`, comments kept (bisect judges a commit's own params.yaml
    with the judge's `gates:`)."""
    raw = yamlfile.load_file(source)
    if not isinstance(raw, dict):
        raise ValidationError(str(source), "", "expected a mapping at the top level", "a YAML mapping")
    content = Path(source).read_text(encoding="utf-8")  # pragma: no mutate -- equivalent: also the locale's
    doc = _round_trip().load(content)
    doc[section] = value
    atomic_write_text(dest, _dump(doc))


def narrow_scope(path: str | Path, skip: list[str]) -> None:
    """params.yaml's `gates.scope.stages` without the skipped stages (every foreach item of one), in
    place: the list keeps its style and comments; nothing to drop writes nothing. A mutation campaign's
    scratch pipeline declares the narrower scope it was given (gates/campaigns/mutate.py drop_stages)."""
    path = Path(path)
    if not skip or not path.exists():
        return
    yamlfile.load_file(path)  # bounded, one dialect (contracts/yamlfile.py), before the round trip reads it
    content = path.read_text(encoding="utf-8")  # pragma: no mutate -- equivalent: also the locale's
    doc = _round_trip().load(content)
    scope = ((doc or {}).get("gates") or {}).get("scope") or {}
    declared = scope.get("stages")
    if declared is None:
        return
    dropped = [i for i, st in enumerate(declared) if str(st).split("@")[0] in skip]
    if not dropped:
        return
    for i in reversed(dropped):
        del declared[i]
    atomic_write_text(path, _dump(doc))


if __name__ == "__main__":  # the command line is pipeline/config.py
    moved(__spec__.name, "pipeline/config.py")
