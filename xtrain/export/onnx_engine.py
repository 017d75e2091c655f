"""ONNX Runtime as a second, independent engine for the closed loop.

    python -m pipeline.to_onnx EXPORT OUT.onnx      # the export as an ONNX graph (input_ids -> logits)

transformers loads the export (fp32 compute: a bf16 export's weights are widened exactly) and
`torch.onnx.export(..., dynamo=True)` turns it into a graph with dynamic batch and sequence
dimensions (the example input has batch 2: with batch 1 the exporter fixes that dimension).
`optimize=False` keeps the parameters as named initializers (`model.layers.0.mlp.down_proj.weight`),
so the negative control can perturb one by name; onnxruntime applies its own graph optimizations.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.errors import moved

INPUT, OUTPUT = "input_ids", "logits"
PREFIX = "hf."  # the wrapper's attribute name: initializers are PREFIX + the export's tensor names


class _Logits(torch.nn.Module):
    def __init__(self, hf: Any) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, use_cache=False).logits


def load_fp32(export_dir: Path) -> Any:
    """transformers' model of the export, computing in fp32 (a bf16 export's weights widened exactly)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(export_dir, local_files_only=True, dtype=torch.float32)


def export_graph(export_dir: Path) -> bytes:
    """torch.onnx's dynamo export of transformers' model of the export (uncached: xtrain/export/onnx_cache.py
    keeps it per config, verified)."""
    model = _Logits(load_fp32(export_dir)).eval()
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
