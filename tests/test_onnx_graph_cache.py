"""The closed loop's ONNX graph, cached per config: the cached graph with an export's weights put in is
byte-for-byte the graph torch.onnx exports for that export, and a graph that does not fit is re-exported.

The graph does not depend on weight values (torch.export traces the code; optimize=False keeps every
parameter a named initializer), so the exporter's ~10 CPU-s are paid once per config, torch,
transformers and onnx_engine.py source, not once per closed loop.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from safetensors.torch import load_file, save_file

from conftest import TinyData, tiny_spec
from xtrain.core.launch import run_single
from xtrain.export import onnx_engine
from xtrain.export.hf_folder import export
from xtrain.export.onnx_engine import StaleGraph, export_graph, graph_key, onnx_bytes, with_weights


@pytest.fixture(scope="module")
def exports(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two exports of one config (tied embeddings, the default), with different weights."""
    root = tmp_path_factory.mktemp("onnx-cache")
    run_single(tiny_spec(tiny_data, run_dir=root / "run", train={"steps": 2}))
    export(root / "run", root / "a", "fp32")
    shutil.copytree(root / "a", root / "b")
    tensors = load_file(str(root / "b" / "model.safetensors"))
    save_file({k: v * 1.25 + 0.01 for k, v in tensors.items()}, str(root / "b" / "model.safetensors"),
              metadata={"format": "pt"})  # fmt: skip
    return root / "a", root / "b"


def test_a_cached_graph_with_new_weights_is_the_fresh_export(
    exports: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = exports
    assert graph_key(a) == graph_key(b)  # one config: one cache entry
    first = onnx_bytes(a, tmp_path)  # a miss: exported, then kept
    assert (tmp_path / f"{graph_key(a)}.onnx").read_bytes() == first
    reused = onnx_bytes(b, tmp_path)  # a hit: a's graph with b's weights
    fresh = export_graph(b)
    assert reused == fresh and reused != first  # byte-for-byte b's own export, and not a's


# -- with_weights on hand-made graphs (no exporter) ------------------------------------------------


def graph(inits: dict[str, np.ndarray]) -> bytes:
    nodes = [helper.make_node("Identity", [name], [f"out{i}"]) for i, name in enumerate(inits)]
    outs = [helper.make_tensor_value_info(f"out{i}", TensorProto.FLOAT, None) for i in range(len(inits))]
    g = helper.make_graph(nodes, "g", [], outs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g).SerializeToString()


def folder(tmp: Path, tensors: dict[str, torch.Tensor], tied: bool = False) -> Path:
    tmp.mkdir()
    save_file(tensors, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(f'{{"tie_word_embeddings": {str(tied).lower()}}}')
    return tmp


def initializers(model: bytes) -> dict[str, list[float]]:
    return {
        i.name: numpy_helper.to_array(i).ravel().tolist()
        for i in onnx.load_from_string(model).graph.initializer
    }


ZERO = np.zeros(2, np.float32)


def test_every_tensor_is_put_in_and_buffers_are_kept(tmp_path: Path) -> None:
    cached = graph({"hf.w": ZERO, "hf.model.rotary_emb.inv_freq": np.array([1.0, 0.5], np.float32)})
    out = with_weights(cached, folder(tmp_path / "e", {"w": torch.tensor([3.0, 4.0], dtype=torch.bfloat16)}))
    assert initializers(out) == {"hf.w": [3.0, 4.0], "hf.model.rotary_emb.inv_freq": [1.0, 0.5]}


def test_tied_embeddings_fill_the_one_initializer_the_exporter_keeps(tmp_path: Path) -> None:
    cached = graph({"hf.lm_head.weight": ZERO})
    emb = {"model.embed_tokens.weight": torch.tensor([5.0, 6.0])}
    assert initializers(with_weights(cached, folder(tmp_path / "t", emb, tied=True))) == {
        "hf.lm_head.weight": [5.0, 6.0]
    }
    with pytest.raises(StaleGraph, match=r"tensors without an initializer: \['model.embed_tokens.weight'\]"):
        with_weights(cached, folder(tmp_path / "u", emb, tied=False))  # untied: lm_head is not that tensor


@pytest.mark.parametrize(
    ("tensors", "why"),
    [
        ({"w": torch.zeros(3)}, r"w: shape \[3\], cached \[2\]"),
        ({"w": torch.zeros(2), "v": torch.zeros(2)}, r"tensors without an initializer: \['v'\]"),
    ],
)
def test_a_graph_that_does_not_fit_is_stale(tmp_path: Path, tensors: dict, why: str) -> None:
    with pytest.raises(StaleGraph, match=why):
        with_weights(graph({"hf.w": ZERO}), folder(tmp_path / "e", tensors))


def test_a_stale_or_broken_entry_is_exported_afresh_and_replaced(tmp_path: Path, monkeypatch) -> None:
    export_dir = folder(tmp_path / "e", {"w": torch.tensor([1.0, 2.0])})
    fresh = graph({"hf.w": np.array([1.0, 2.0], np.float32)})
    calls: list[Path] = []
    monkeypatch.setattr(onnx_engine, "export_graph", lambda d: calls.append(d) or fresh)
    cache = tmp_path / "cache"
    entry = cache / f"{graph_key(export_dir)}.onnx"
    for stale in (b"not onnx at all", graph({"hf.w": np.zeros(5, np.float32)})):
        entry.parent.mkdir(exist_ok=True)
        entry.write_bytes(stale)
        assert onnx_bytes(export_dir, cache) == fresh and entry.read_bytes() == fresh
    assert calls == [export_dir, export_dir]
    assert onnx_bytes(export_dir, cache) == fresh and len(calls) == 2  # now a hit


def test_the_key_changes_with_the_config(exports: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = exports
    other = tmp_path / "c"
    shutil.copytree(a, other)
    (other / "config.json").write_text(
        (a / "config.json").read_text().replace('"rope_theta"', '"rope_theta" ', 1)
    )
    assert graph_key(other) != graph_key(a)
