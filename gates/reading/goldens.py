"""Which golden judges a run, and in which tier (Megatron-LM's way).

The golden of the run's exact environment (env_id) and config is judged in its own tier (exact:
bitwise). Without one, the run is judged in the approximate tier against a golden of the same
config from another environment, chosen deterministically: same device type first, then same
precision, then by env_id. A golden must cover exactly the steps and evals the config implies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from params.cadence import eval_steps
from registry.store import Entry, Registry


@dataclass(frozen=True)
class Choice:
    entry: Entry
    tier: str  # exact | approx
    cross_env: bool  # judged against another environment's golden

    @property
    def name(self) -> str:
        return f"{self.entry.data['env_id']} v{self.entry.version}"


def golden_env(entry: Entry) -> tuple[str, str]:
    """(device type, precision) the golden was blessed on."""
    env = entry.data["provenance"]["env"]
    device = env.get("device_type") or entry.data["env_id"].partition("-")[0]
    return device, env.get("precision", "fp32")


def choose(reg: Registry, env_id: str, config_hash: str, device: str, precision: str) -> Choice | None:
    own = reg.golden(env_id)
    if own is not None and own.data["config_hash"] == config_hash:
        return Choice(own, own.data["tier"], cross_env=False)
    others = []
    for other in reg.env_ids():
        if other == env_id:
            continue
        same_config = [e for e in reg.goldens(other) if e.data["config_hash"] == config_hash]
        if same_config:
            others.append(same_config[-1])
    if not others:
        return None

    def preference(e: Entry) -> tuple[bool, bool, str]:
        d, p = golden_env(e)
        return d != device, p != precision, e.data["env_id"]

    return Choice(min(others, key=preference), "approx", cross_env=True)


def coverage_problems(
    golden: dict[str, Any], train: dict[str, Any], evaluated: list[int] | None = None
) -> list[str]:
    """A golden must hold every step 0..steps-1 and every eval step the config implies; for a loop of
    its own (`evaluated`: the steps its run evaluated at, any steps), every one of those."""
    where = f"golden {golden['env_id']} v{golden['version']}"
    out = []
    want_train = [str(s) for s in range(train["steps"])]
    got_train = list(golden["metrics"]["train_loss"]["values"])
    if sorted(got_train, key=int) != want_train:
        out.append(f"{where} holds train losses for {len(got_train)} steps, the config has {train['steps']}")
    got_eval = sorted(golden["metrics"].get("val_loss", {}).get("values", {}), key=int)
    if evaluated is not None:
        missing = [s for s in evaluated if str(s) not in got_eval]
        if missing:
            out.append(f"{where} holds val losses at steps {got_eval}, the run evaluated at {evaluated}")
        return out
    want_eval = [str(s) for s in eval_steps(train)]
    if got_eval != want_eval:
        out.append(f"{where} holds val losses at steps {got_eval}, the config implies {want_eval}")
    return out
