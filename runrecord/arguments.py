"""Every value runrecord receives, checked at the call that receives it (one line, before training goes on).

A bad value found only inside finish() costs the whole training run and ends in a traceback; here it
is a `RunRecordError` (a ValueError, and the project's one-line error: contracts/errors.py) naming
the call, the argument and the rule, raised where the value arrives.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable
from typing import Any

from contracts.errors import XtrainError

LAUNCHERS = ("single", "thread", "proc")
PRECISIONS = ("fp32", "bf16")


class RunRecordError(XtrainError, ValueError):
    """A value runrecord cannot record: `runrecord: CALL: ARG: problem (rule: ...)`, one line."""

    exit_code = 2

    def __init__(self, call: str, arg: str, problem: str, rule: str = "") -> None:
        super().__init__(f"runrecord: {call}: {arg}: {problem}" + (f" (rule: {rule})" if rule else ""))


def count(call: str, arg: str, value: Any, least: int, rule: str) -> int:
    """An int (not a bool) >= least."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise RunRecordError(call, arg, f"{value!r} is not an integer >= {least}", rule)
    return int(value)


def real(call: str, arg: str, value: Any, least: float | None = None, finite: bool = False) -> float:
    """A real number (a Python or numpy number, or a one-element tensor); NaN and inf pass unless
    `finite` (a diverged loss is the gates' verdict, not bad input); >= least where given."""
    if hasattr(value, "item") and getattr(value, "numel", lambda: 1)() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RunRecordError(call, arg, f"{value!r} is not a number")
    x = float(value)
    if finite and not math.isfinite(x):
        raise RunRecordError(call, arg, f"{x!r} is not finite")
    if least is not None and x < least:  # NaN compares false: recorded, and the finite gate fails it
        raise RunRecordError(call, arg, f"{x!r} is below {least:g}")
    return x


def choice(call: str, arg: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise RunRecordError(call, arg, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def indices(call: str, arg: str, values: Iterable[Any]) -> list[int]:
    """Dataset indices: a list, tuple or 1-D tensor of integers >= 0."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise RunRecordError(call, arg, f"a {type(values).__name__} is not a list of dataset indices")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
            raise RunRecordError(call, arg, f"{v!r} is not a dataset index (an integer >= 0)")
        out.append(int(v))
    return out


def plain_json(call: str, arg: str, value: Any) -> Any:
    """A JSON copy of `value` (what the record will hold): no NaN/inf, nothing JSON cannot say."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise RunRecordError(call, arg, f"not plain JSON ({' '.join(str(e).split())})") from None


def run_config(config: Any) -> dict[str, Any]:
    """The run's config: seed, model, train, with train.steps >= 1 (the run's length, which the gates
    check the record against) and train.eval_every >= 0 where given (rec.eval_due's cadence)."""
    call = "RunRecorder"
    if not isinstance(config, dict):
        raise RunRecordError(call, "config", f"a {type(config).__name__}, not a dict")
    missing = [k for k in ("seed", "model", "train") if k not in config]
    if missing:
        raise RunRecordError(call, "config", f"missing {', '.join(missing)}", "seed, model, train")
    if not isinstance(config["train"], dict):
        raise RunRecordError(call, "config.train", f"a {type(config['train']).__name__}, not a dict")
    rule = "the run's length in optimizer steps (the gates check the record against it)"
    count(call, "config.train.steps", config["train"].get("steps"), 1, rule)
    if config["train"].get("eval_every") is not None:
        count(call, "config.train.eval_every", config["train"]["eval_every"], 0, "rec.eval_due's cadence")
    return plain_json(call, "config", config)
