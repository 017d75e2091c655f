"""Provenance of a blessing: git revision, params hash, environment, torch version, time (torch-free)."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(env: dict[str, Any] | None = None, params_path: str | Path = "params.yaml") -> dict[str, Any]:
    rev = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    params = Path(params_path)
    try:
        torch_version = metadata.version("torch")  # pragma: no mutate -- equivalent: names ignore case
    except metadata.PackageNotFoundError:
        torch_version = "absent"
    env = env or {
        "platform": f"{platform.system().lower()}-{platform.machine()}",
        "python": platform.python_version(),
        "torch": torch_version,
    }
    return {
        "git_revision": rev,
        "git_dirty": None if status is None else bool(status),
        "params_hash": hashlib.sha256(params.read_bytes()).hexdigest()[:16] if params.exists() else None,
        "env_id": env.get("env_id", f"{env.get('platform', 'unknown')}-python{env.get('python', '?')}"),
        "env": env,
        "torch": env.get("torch", torch_version),
        "time_utc": datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
    }
