"""Is this checkout already installed as it should be? (ci/setup.sh's fast path)

    python3 ci/installed.py --lock LOCK   # exit 0: installed == the lock and this checkout; 3: only this
                                          # checkout itself (pip install --no-deps -e .); 1: install the lock
    python3 ci/installed.py [EXTRAS]      # XTRAIN_LOCK=none: pyproject's ranges (a user's own environment)

pip takes about 10 s to resolve an environment that already has everything; this check reads the
installed distributions' metadata instead (about 0.2 s). With a lock (docs/environment-lock.md),
"installed" means: every pin of the lock that holds for this interpreter is installed at exactly
that version (a drifted or missing package: 1, and setup reinstalls from the lock, hash-checked);
without one, every requirement of pyproject.toml (and of the extras named) in a version its
specifier allows. Either way the project itself must be installed editable from THIS checkout, since
the stages of examples/ run from their own folders and would otherwise import another checkout's
code. Anything it cannot decide (an unreadable lock or pyproject, no `packaging`) answers 1: pip decides.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "xtrain-gates"


def requirements(extras: list[str]) -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    return list(project["dependencies"]) + [r for e in extras for r in optional.get(e, [])]


def unmet(reqs: list[str]) -> list[str]:
    from packaging.requirements import Requirement

    out = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # not for this interpreter (e.g. a C extension on PyPy)
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(f"{req.name} missing")
            continue
        if not req.specifier.contains(version, prereleases=True):
            out.append(f"{req.name} {version} not {req.specifier}")
    return out


def installed_here() -> str | None:
    """Why the project is not installed editable from this checkout, or None when it is."""
    try:
        url = json.loads(metadata.distribution(PROJECT).read_text("direct_url.json") or "{}")
    except metadata.PackageNotFoundError:
        return f"{PROJECT} not installed"
    editable = url.get("dir_info", {}).get("editable", False)
    if not editable or url.get("url") != ROOT.as_uri():
        return f"{PROJECT} installed from {url.get('url', 'an index')}, not this checkout"
    return None


def drifted(lock: str) -> list[str]:
    import lockfile  # beside this file

    return lockfile.drift(lockfile.read(Path(lock)))


def main(argv: list[str]) -> int:
    locked = argv[:1] == ["--lock"] and len(argv) == 2
    try:
        if locked:
            unmet_list = drifted(argv[1])
        else:
            unmet_list = unmet(requirements([e for e in (argv[0].split(",") if argv else []) if e]))
    except Exception as e:  # undecidable here: pip decides
        unmet_list = [f"cannot check ({type(e).__name__}: {e})"]
    if unmet_list:
        more = f" (+{len(unmet_list) - 3} more)" if len(unmet_list) > 3 else ""
        print(f"setup: install{' the lock' if locked else ''}: {'; '.join(unmet_list[:3])}{more}")
        return 1
    here = installed_here()
    print(
        f"setup: {'installed == the lock' if locked else 'requirements met'}; "
        f"{here + ': installing this checkout' if here else 'this checkout installed'}"
    )
    return 3 if here else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
