"""Closed loop: transformers reloads exports/hf (save_pretrained) and reproduces the probe that the
trained model computed in train.py (runs/single/probe.safetensors): logits within
params.yaml reload.logits_atol, greedy tokens identical. Negative control: the same reload with one
tensor perturbed must exceed the tolerance, or the check could not fail. Exit 0 pass, 1 fail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hfconfig
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def replay(model, prompts: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        logits = model(prompts).logits.float()
        ids = prompts
        for _ in range(new_tokens):
            ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return logits, ids[:, prompts.shape[1] :]


def main() -> int:
    try:
        atol = hfconfig.load()["reload"]["logits_atol"]
    except hfconfig.ParamsError as e:
        print(e, file=sys.stderr)
        return 2
    probe = load_file("runs/single/probe.safetensors")
    model = AutoModelForCausalLM.from_pretrained("exports/hf", dtype=torch.float32).eval()
    logits, tokens = replay(model, probe["prompts"], probe["tokens"].shape[1])
    diff = float((logits - probe["logits"]).abs().max())
    same = bool(torch.equal(tokens, probe["tokens"]))
    with torch.no_grad():
        model.model.norm.weight.mul_(1.01)  # negative control: one tensor off by 1 %
    ctl_logits, _ = replay(model, probe["prompts"], 0)
    ctl = float((ctl_logits - probe["logits"]).abs().max())
    ok = diff <= atol and same and ctl > atol
    report = {
        "passed": ok,
        "logits_max_abs_diff": diff,
        "atol": atol,
        "tokens_identical": same,
        "control_max_abs_diff": ctl,
        "prompts": int(probe["prompts"].shape[0]),
    }
    Path("reports").mkdir(exist_ok=True)
    Path("reports/reload.json").write_text(json.dumps(report, indent=2) + "\n")
    verdict = "pass" if ok else "FAIL"
    print(
        f"reload: {verdict}: logits max |diff| {diff:.3g} (atol {atol:g}), greedy tokens "
        f"{'identical' if same else 'DIFFER'}; control (norm x1.01) {ctl:.3g} {'>' if ctl > atol else '<='} atol"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
