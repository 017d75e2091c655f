"""contracts/yamlfile.py's pipeline loader under mutation (docs/judge-mutation.md), in-process.

bounded_events counts what a dvc.yaml or dvc.lock expands to (each alias as the size of what it
names) and how deep it nests, before anything is built: asserted at the exact bound, from both
sides. load_pipeline reads a file as DVC does and names it in every refusal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import yamlfile
from contracts.validate import ValidationError
from contracts.yamlfile import MAX_DEPTH, bounded_events, load_pipeline, load_pipeline_text

# nodes: the mapping 1, five keys 5, x [1, 2] 3, y [*x, *x] 1 + 3 + 3, c [*y, *y, *y] 1 + 21,
# the anchored scalar 1 and its alias 1: 40
EXPANDING = "a: &x [1, 2]\nb: &y [*x, *x]\nc: [*y, *y, *y]\nd: &s v\ne: *s\n"


def refusal(call, *args, **kwargs) -> str:
    with pytest.raises(ValidationError) as e:
        call(*args, **kwargs)
    return str(e.value)


def test_aliases_count_as_what_they_name_at_the_exact_bound(monkeypatch) -> None:
    monkeypatch.setattr(yamlfile, "PIPELINE_NODES", 40)
    bounded_events(EXPANDING, "f", aliases=True)
    assert load_pipeline_text(EXPANDING, "f")["c"] == [[[1, 2], [1, 2]]] * 3
    monkeypatch.setattr(yamlfile, "PIPELINE_NODES", 39)
    assert refusal(bounded_events, EXPANDING, "f", aliases=True) == "f: line 6: expands to more than 39 nodes"


def test_an_undefined_alias_counts_one_and_is_named_by_the_loader(monkeypatch) -> None:
    monkeypatch.setattr(yamlfile, "PIPELINE_NODES", 3)  # the mapping, the key, the alias
    assert (
        refusal(load_pipeline_text, "a: *nope\n", "f") == "f: line 1: not valid YAML: found undefined alias"
    )


def test_depth_is_counted_down_again_when_a_container_closes() -> None:
    """[x] closes at depth 3; then MAX_DEPTH - 1 more levels open under the list at depth 2."""
    deep = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    ok = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    assert load_pipeline_text(f"a: [[x], {ok}]\n", "f")["a"][0] == ["x"]
    assert refusal(load_pipeline_text, f"a: [[x], {deep}]\n", "f") == (
        f"f: line 1: nested deeper than {MAX_DEPTH} levels"
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: !!python/tuple [1]\n", "line 1: not valid YAML: could not determine a constructor for the tag"),
        ("a: 1\nb: 0b_\n", "line 2: not valid YAML: '0b' is not a number"),
    ],
)
def test_what_only_the_loader_refuses_is_one_line_naming_the_file(text: str, line: str) -> None:
    assert refusal(load_pipeline_text, text, "dvc.lock").startswith(f"dvc.lock: {line}")


def test_load_pipeline_reads_a_file_with_anchors_by_default(tmp_path: Path) -> None:
    path = tmp_path / "dvc.yaml"
    path.write_text("a: &x [1, 1e-3]\nb: *x\n")
    assert load_pipeline(path) == {"a": [1, 0.001], "b": [1, 0.001]}
    assert refusal(load_pipeline, path, aliases=False) == f"{path}: line 2: alias *x refused"


def test_load_pipeline_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "dvc.lock"
    path.write_bytes(b"a: \xff\n")
    assert refusal(load_pipeline, path) == f"{path}: byte 3: not UTF-8 text (rule: a UTF-8 YAML file)"
    assert refusal(load_pipeline, tmp_path) == (
        f"{tmp_path}: not a regular file (a device, FIFO or folder) (rule: a regular file)"
    )
