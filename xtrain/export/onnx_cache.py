"""The closed loop's ONNX graph cache: an entry is used only when it is provably this export's graph.

torch.onnx traces the code, not the weights: for one config, one exporter and one set of libraries the
graph is the same bytes for every export but its initializers. An entry is kept per key, the sha256 of
`graph_inputs` (config.json, the versions of python, torch, transformers, onnx, onnxscript, onnx-ir,
numpy and protobuf, and onnx_engine.py's bytes), and reused with this export's tensors put in: the
exporter's ~10 CPU-s are paid once per key, not once per closed loop.

"Provably", as ccache and pip check a cache entry's hash on read:
- `KEY.json`, written after `KEY.onnx`, records the key, its inputs and the graph's sha256 and size; a
  read needs both files, the record's key and inputs equal to this export's, and the graph's bytes to hash
  to the record: a graph replaced, truncated, copied from another key or with one constant nudged is not
  used;
- the graph must be what the exporter makes of the key: made by this torch, input_ids -> logits, and
  every initializer a parameter or buffer of the model transformers builds from this export, each
  replaced by its value here (a constant that is neither is refused, and every tensor of the export must
  be an initializer), so no number of the cached graph's own reaches the verdict but its operators'.
Not proved: an entry and its record rewritten consistently by hand, as a forger who rewrites dvc.lock
and the registry seal together (docs/verdicts.md). An entry that is not used is exported afresh and
replaced, said in one line; a cache that cannot be read or written gives one warning line and the graph
is exported without it (tests/process/test_onnx_graph_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.errors import FileWriteError, one_line
from contracts.fileio import atomic_write_bytes, atomic_write_json, canonical_json, read_regular
from contracts.validate import ValidationError
from xtrain.export import onnx_engine

FORMAT = "xtrain-onnx-graph/1"
LIBRARIES = ("transformers", "onnx", "onnxscript", "onnx-ir", "numpy", "protobuf")
RECORD_LIMIT = 1 << 20
GRAPH_LIMIT = 16 << 30
TIED = ("model.embed_tokens.weight", "lm_head.weight")  # tie_word_embeddings: the export writes the first


class StaleGraph(Exception):
    """A cache entry that is not provably the graph of this export."""


def graph_inputs(export_dir: Path) -> dict[str, Any]:
    """Everything the exporter's graph depends on but the weights' values."""
    versions: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "config": json.loads((export_dir / "config.json").read_text(encoding="utf-8")),
        "versions": versions,
        "exporter_sha256": hashlib.sha256(Path(onnx_engine.__file__).read_bytes()).hexdigest(),
    }


def graph_key(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(inputs).encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One key's place in the cache: the graph and the record that vouches for it."""

    cache: Path
    key: str

    @property
    def graph(self) -> Path:
        return self.cache / f"{self.key}.onnx"

    @property
    def record(self) -> Path:
        return self.cache / f"{self.key}.json"


def read_entry(entry: Entry, inputs: Mapping[str, Any]) -> bytes | None:
    """The entry's graph bytes, verified against its record; None when the cache holds nothing for the key.
    StaleGraph when something is there that is not provably this key's graph (or cannot be read)."""
    try:
        if not entry.graph.exists() and not entry.record.exists():
            return None
        record = json.loads(read_regular(entry.record, RECORD_LIMIT))
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            raise StaleGraph(f"{entry.record.name} is not a record of this cache ({FORMAT})")
        if record.get("key") != entry.key or record.get("inputs") != json.loads(canonical_json(inputs)):
            raise StaleGraph(f"{entry.record.name} records another key's inputs")
        size = record.get("bytes")
        if not isinstance(size, int) or not 0 < size <= GRAPH_LIMIT:
            raise StaleGraph(f"{entry.record.name}: bytes {size!r} is not a size")
        if entry.graph.stat().st_size != size:
            raise StaleGraph(f"{entry.graph.stat().st_size} bytes, the record says {size}")
        graph = read_regular(entry.graph, size)
    except (OSError, ValidationError, ValueError) as e:  # ValueError: JSON that does not parse
        raise StaleGraph(f"cannot be read: {one_line(e)}") from e
    digest = hashlib.sha256(graph).hexdigest()
    if digest != record.get("sha256"):
        raise StaleGraph(
            f"sha256 {digest[:16]}… ({len(graph)} bytes) is not the recorded {str(record.get('sha256'))[:16]}…"
        )
    return graph


def write_entry(entry: Entry, inputs: Mapping[str, Any], graph: bytes) -> str | None:
    """Keep `graph` for the key: the graph, then its record (a reader needs both to agree). The reason it
    could not be kept, or None."""
    record = {
        "format": FORMAT,
        "key": entry.key,
        "inputs": inputs,
        "sha256": hashlib.sha256(graph).hexdigest(),
        "bytes": len(graph),
    }
    try:
        atomic_write_bytes(entry.graph, graph)
        atomic_write_json(entry.record, record)
    except (FileWriteError, OSError) as e:
        cause = e.__cause__ if isinstance(e, FileWriteError) and isinstance(e.__cause__, OSError) else e
        return one_line(cause)
    return None


def export_tensors(export_dir: Path) -> tuple[dict[str, np.ndarray], set[str], bool]:
    """What a fresh export's initializers hold: every parameter and buffer of the model transformers builds
    from the export in fp32, by name (a tied weight under both names); the export's tensor names; tied."""
    from safetensors import safe_open

    hf = onnx_engine.load_fp32(export_dir)
    named = {
        **dict(hf.named_parameters(remove_duplicate=False)),
        **dict(hf.named_buffers(remove_duplicate=False)),
    }
    with safe_open(str(export_dir / "model.safetensors"), "numpy") as f:
        names = set(f.keys())
    return {k: v.detach().numpy() for k, v in named.items()}, names, bool(hf.config.tie_word_embeddings)


def check_graph(model: Any) -> None:
    """What the exporter makes of any key: a graph of this torch, input_ids -> logits, dense initializers."""
    made = (model.producer_name, model.producer_version)
    if made != ("pytorch", torch.__version__):
        raise StaleGraph(f"made by {made[0]} {made[1]}, not by this torch {torch.__version__}")
    io = ([i.name for i in model.graph.input], [o.name for o in model.graph.output])
    if io != ([onnx_engine.INPUT], [onnx_engine.OUTPUT]):
        raise StaleGraph(f"inputs and outputs {io}, not {onnx_engine.INPUT} -> {onnx_engine.OUTPUT}")
    if len(model.graph.sparse_initializer):
        raise StaleGraph("sparse initializers: constants not accounted for")


def with_weights(graph: bytes, values: Mapping[str, np.ndarray], export_names: set[str], tied: bool) -> bytes:
    """The cached graph with every initializer replaced by this export's model's value of it. Every
    initializer must be a parameter or buffer of that model (same shape and type), and every tensor of the
    export an initializer (a tied embedding: the one the exporter keeps, under either name)."""
    import onnx
    from onnx import helper, numpy_helper

    try:
        model = onnx.load_from_string(graph)
    except Exception as e:  # protobuf's DecodeError and friends: a truncated or foreign file
        raise StaleGraph(f"not an ONNX model: {type(e).__name__}") from e
    check_graph(model)
    put: set[str] = set()
    for init in model.graph.initializer:
        name = init.name.removeprefix(onnx_engine.PREFIX)
        if not init.name.startswith(onnx_engine.PREFIX) or name not in values:
            raise StaleGraph(
                f"initializer {init.name!r} is no tensor of the export's model: a constant not accounted for"
            )
        value = values[name]
        if list(value.shape) != list(init.dims):
            raise StaleGraph(f"{name}: shape {list(value.shape)}, cached {list(init.dims)}")
        if helper.np_dtype_to_tensor_dtype(value.dtype) != init.data_type:
            raise StaleGraph(f"{name}: {value.dtype}, cached type {init.data_type}")
        init.CopyFrom(numpy_helper.from_array(value, init.name))
        put.add(name)
    left = export_names - put - (set(TIED) if tied and put & set(TIED) else set())
    if left:
        raise StaleGraph(f"tensors without an initializer: {sorted(left)[:3]}")
    return model.SerializeToString()


def said(entry: Entry, why: str | None, unkept: str | None) -> str:
    """The one line about a graph exported afresh: why the entry was not used, and whether it was kept."""
    if why and not unkept:
        return f"onnx: {entry.graph} is not this export's graph ({why}): exported afresh and replaced"
    if why:
        return f"onnx: warning: {entry.graph} is not this export's graph ({why}); exported afresh, not kept ({unkept})"
    if unkept:
        return (
            f"onnx: warning: the graph cache {entry.cache} cannot be written ({unkept}): exported without it"
        )
    return f"onnx: exported the graph of this config; kept in {entry.graph}"


def onnx_bytes(export_dir: Path, cache: Path | None = None) -> bytes:
    """The export as a serialized ONNX model (fp32 compute): with `cache`, the verified graph of this key with
    this export's tensors put in (byte-for-byte the fresh export's), else exported afresh (and kept)."""
    if cache is None:
        return onnx_engine.export_graph(export_dir)
    inputs = graph_inputs(export_dir)
    entry, why = Entry(cache, graph_key(inputs)), None
    try:
        graph = read_entry(entry, inputs)
        if graph is not None:
            model = with_weights(graph, *export_tensors(export_dir))
            print(f"onnx: the graph of this config from {entry.graph} (sha256 verified), with this export's weights",
                  file=sys.stderr)  # fmt: skip
            return model
    except StaleGraph as e:
        why = str(e)
    fresh = onnx_engine.export_graph(export_dir)
    print(said(entry, why, write_entry(entry, inputs, fresh)), file=sys.stderr)
    return fresh
