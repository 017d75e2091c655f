"""ONNX Runtime as a second, independent engine for the closed loop.

    python -m pipeline.to_onnx EXPORT OUT.onnx      # the export as an ONNX graph (input_ids -> logits)

transformers loads the export (fp32 compute: a bf16 export's weights are widened exactly) and
`torch.onnx.export(..., dynamo=True)` turns it into a graph with dynamic batch and sequence
dimensions (the example input has batch 2: with batch 1 the exporter fixes that dimension).
`optimize=False` keeps the parameters as named initializers (`model.layers.0.mlp.down_proj.weight`),
so the negative control can perturb one by name; onnxruntime applies its own graph optimizations.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.errors import moved
from contracts.fileio import atomic_write_bytes

INPUT, OUTPUT = "input_ids", "logits"
PREFIX = "hf."  # the wrapper's attribute name: initializers are PREFIX + the export's tensor names


class _Logits(torch.nn.Module):
    def __init__(self, hf: Any) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, use_cache=False).logits


def onnx_bytes(export_dir: Path, cache: Path | None = None) -> bytes:
    """The export as a serialized ONNX model (fp32 compute). With `cache`, the graph exported for the
    same config.json, torch, transformers and this module is reused with this export's weights put in
    (the exporter's ~10 CPU-s, half the closed loop's; the graph does not depend on weight values)."""
    if cache is None:
        return export_graph(export_dir)
    entry = cache / f"{graph_key(export_dir)}.onnx"
    if entry.is_file():
        try:
            model = with_weights(entry.read_bytes(), export_dir)
            print(f"onnx: the graph of this config from {entry}, with this export's weights", file=sys.stderr)
            return model
        except StaleGraph as e:  # a graph that does not fit this export's tensors: export afresh
            print(f"onnx: {entry} does not fit ({e}): exporting afresh", file=sys.stderr)
    fresh = export_graph(export_dir)
    atomic_write_bytes(entry, fresh)
    return fresh


def export_graph(export_dir: Path) -> bytes:
    """torch.onnx's dynamo export of transformers' model of the export."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(export_dir, local_files_only=True, dtype=torch.float32)
    model = _Logits(hf).eval()
    example = torch.zeros((2, 8), dtype=torch.long)
    dims = {INPUT: {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
    program = torch.onnx.export(
        model,
        (example,),
        dynamo=True,
        input_names=[INPUT],
        output_names=[OUTPUT],
        dynamic_shapes=dims,
        optimize=False,
        verbose=False,
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        program.save(path, external_data=False)
        return path.read_bytes()


def graph_key(export_dir: Path) -> str:
    """What the graph depends on: the model's config, the exporting libraries, this module."""
    import onnx
    import transformers

    h = hashlib.sha256()
    for part in (
        (export_dir / "config.json").read_bytes(),
        f"torch {torch.__version__} transformers {transformers.__version__} onnx {onnx.__version__}".encode(),
        Path(__file__).read_bytes(),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


TIED = ("model.embed_tokens.weight", "lm_head.weight")  # tie_word_embeddings: the export writes the first


class StaleGraph(Exception):
    """A cached graph that does not fit the export's tensors."""


def with_weights(graph: bytes, export_dir: Path) -> bytes:
    """The cached graph with every initializer that is a tensor of the export replaced by this export's
    (fp32, as transformers loads it); each tensor of the export must be one initializer's, same shape."""
    import onnx
    from onnx import numpy_helper
    from safetensors.torch import load_file

    tensors = load_file(str(export_dir / "model.safetensors"))
    tied = json.loads((export_dir / "config.json").read_text()).get("tie_word_embeddings", False)
    if tied and TIED[1] not in tensors:  # one tensor, two names: the exporter keeps lm_head's
        tensors[TIED[1]] = tensors[TIED[0]]
    try:
        model = onnx.load_from_string(graph)
    except Exception as e:  # protobuf's DecodeError and friends: a truncated or foreign file
        raise StaleGraph(f"not an ONNX model: {type(e).__name__}") from e
    put: set[str] = set()
    for init in model.graph.initializer:
        name = init.name.removeprefix(PREFIX)
        if init.name.startswith(PREFIX) and name in tensors:
            value = tensors[name].float().numpy()
            if list(value.shape) != list(init.dims):
                raise StaleGraph(f"{name}: shape {list(value.shape)}, cached {list(init.dims)}")
            init.CopyFrom(numpy_helper.from_array(value, init.name))
            put.add(name)
    left = set(tensors) - put - ({TIED[0], TIED[1]} if tied and put & set(TIED) else set())
    if left:
        raise StaleGraph(f"tensors without an initializer: {sorted(left)[:3]}")
    return model.SerializeToString()


def perturbed(model_bytes: bytes, tensor: str) -> bytes:
    """The same graph with initializer `tensor` scaled by 1.5 and shifted by 0.05."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(model_bytes)
    for i, init in enumerate(model.graph.initializer):
        if init.name == PREFIX + tensor:
            arr = numpy_helper.to_array(init)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr * 1.5 + 0.05, init.name))
            return model.SerializeToString()
    raise KeyError(f"negative control: {tensor} is not an initializer of the ONNX graph")


class OnnxEngine:
    """An onnxruntime CPU session; called like our model: ids [B, T] -> logits [B, T, V] (float32)."""

    def __init__(self, model_bytes: bytes) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        # A few threads: the logits check is a tolerance (1e-4), not bitwise, and one thread made
        # the 29M GPU-profile model's greedy continuations a large part of the stage on the H200 runner.
        opts.intra_op_num_threads = min(4, len(os.sched_getaffinity(0)))
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        (logits,) = self.session.run([OUTPUT], {INPUT: ids.numpy().astype(np.int64)})
        return torch.from_numpy(logits)


if __name__ == "__main__":  # the command line is pipeline/to_onnx.py
    moved(__spec__.name, "pipeline/to_onnx.py")
