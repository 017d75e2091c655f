"""contracts/errors.py under mutation (docs/judge-mutation.md): the one-line error path, in-process."""

from __future__ import annotations

import errno

import pytest

from contracts.errors import ValidationError, moved, one_line, report, shown


def test_an_os_error_without_errno_is_named_with_a_question_mark() -> None:
    err = OSError()
    err.filename = "f.json"
    assert one_line(err) == "f.json: None (?)"
    assert one_line(OSError(errno.EPERM, "denied", "g")) == "g: denied (EPERM)"


def test_report_prints_one_line_and_returns_the_exit_code(capsys, monkeypatch) -> None:
    monkeypatch.delenv("XTRAIN_DEBUG", raising=False)
    assert report(ValidationError("p.yaml", "k", "bad\nthing"), prefix="gates: ") == 2
    assert report(RuntimeError("a\n  b")) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err == "error: gates: p.yaml: k: bad\\nthing\nerror: a b\n"


def test_moved_names_the_command_and_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        moved("params.config", "pipeline/config.py")
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "error: python -m params.config: moved; run python -m pipeline.config (the same arguments)\n"
    )


def test_an_error_without_a_message_is_named_by_its_type() -> None:
    assert one_line(RuntimeError()) == "RuntimeError"
    assert one_line(ValueError("  two\n lines ")) == "two lines"


def test_report_with_debug_prints_the_traceback_first(capsys, monkeypatch) -> None:
    monkeypatch.setenv("XTRAIN_DEBUG", "1")
    try:
        raise ValueError("boom")
    except ValueError as e:
        assert report(e) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("ValueError: boom\nerror: boom\n")


@pytest.mark.parametrize(
    ("value", "plain", "rich"),
    [
        ("plain text", "plain text", "plain text"),
        ("why\n  v9  forged", "why\\n  v9  forged", "why\\n  v9  forged"),
        ("gate\x1b[31mred\x1b]0;title\x07", "gate\\x1b[31mred\\x1b]0;title\\x07", "gate\\x1b[31mred\\x1b]0;title\\x07"),  # `[3` is no markup
        ("[red]id[/]", "[red]id[/]", "\\[red]id\\[/]"),
        (None, "None", "None"),
        (3.5, "3.5", "3.5"),
    ],
)  # fmt: skip
def test_shown_escapes_a_files_text_and_for_rich_its_markup(value, plain: str, rich: str) -> None:
    """One helper for every printed registry and report text (issue #51 item 4)."""
    assert shown(value) == plain
    assert shown(value, markup=True) == rich
    assert "\n" not in shown(value) and "\x1b" not in shown(value, True)
