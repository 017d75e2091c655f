"""Is this checkout already installed with every requirement it declares? (ci/setup.sh's fast path)

    python3 ci/installed.py [EXTRAS]   # exit 0: nothing to install; 3: only this checkout itself
                                       # (pip install --no-deps -e .); 1: run pip; one line says why

pip takes about 10 s to resolve an environment that already has everything; this check reads the
installed distributions' metadata instead (about 0.2 s). "Installed" means: every requirement of
pyproject.toml (and of the extras named) is present in a version its specifier allows, and the
project itself is installed editable from THIS checkout, since the stages of examples/ run from
their own folders and would otherwise import another checkout's code. Anything it cannot decide
(no tomllib before Python 3.11, no `packaging`, an unreadable pyproject) answers 1: pip decides.
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


def main(argv: list[str]) -> int:
    extras = [e for e in (argv[0].split(",") if argv else []) if e]
    try:
        missing = "; ".join(unmet(requirements(extras)))
    except Exception as e:  # undecidable here: pip decides
        missing = f"cannot check ({type(e).__name__}: {e})"
    if missing:
        print(f"setup: install: {missing}")
        return 1
    here = installed_here()
    print(
        f"setup: requirements met; {here + ': installing this checkout' if here else 'this checkout installed'}"
    )
    return 3 if here else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
