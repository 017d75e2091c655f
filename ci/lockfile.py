"""The locked environment, ci/requirements.lock: read it, compare it, check it (docs/environment-lock.md).

    python3 ci/lockfile.py check [LOCK]          # every pin hashed; pyproject (+dev) and the installed closure
                                                 # covered; no torch, no CUDA wheel (exit 0 / 1)
    python3 ci/lockfile.py moved OLD NEW         # the packages that moved between two locks (old -> new)
    python3 ci/lockfile.py drift [LOCK]          # what this interpreter has that is not the lock (exit 0 / 1)
    python3 ci/lockfile.py for 3.12 [LOCK]       # the pins that hold for CPython 3.12 on Linux, markers
                                                 # evaluated there (pip download's markers are the host's)
    python3 ci/lockfile.py pick NAME...          # those pins of the lock that hold here (setup: the build
                                                 # backend first, so sdists build with the locked one)

The lock is `uv pip compile --universal --generate-hashes` output: one `name==version [; marker]` per
line with a `--hash=sha256:` for every file of that version, and several lines for one name where
the Python versions need different releases (their markers part them). torch stays outside it
(ci/setup.sh installs it: the CPU build here, a GPU image's own CUDA build there), and with it the
wheels only torch's CUDA build needs (nvidia-*, cuda-*, triton); torch's pure-Python dependencies
are in it. Runs on the interpreter being set up: standard library, plus `packaging` (pip's vendored
copy where the interpreter has none, as a fresh virtualenv).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # a fresh virtualenv: pip's own copy
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "ci" / "requirements.lock"
EXTRAS = ("dev",)  # the extras the lock covers
# Outside the lock: torch (ci/setup.sh installs it), and what only its CUDA build needs.
OUTSIDE = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


class LockError(Exception):
    """The lock file is not what this project's lock must be (one line: the file, the line, what)."""


@dataclass(frozen=True)
class Pin:
    name: str  # canonical (PEP 503)
    version: str
    marker: str  # "" where the pin holds everywhere
    hashes: tuple[str, ...]
    line: int

    def holds(self, env: dict[str, str] | None = None) -> bool:
        return not self.marker or Marker(self.marker).evaluate(env)

    def key(self) -> tuple[str, str]:
        return self.name, self.marker


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement, its `\\` continuations joined, comments dropped."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not parts:
            start = number
        more = line.endswith("\\")
        parts.append(line[:-1] if more else line)
        if not more:
            joined = " ".join(p.strip() for p in parts).strip()
            parts = []
            if joined:
                out.append((start, joined))
    return out


def parse(text: str, source: str = "ci/requirements.lock") -> list[Pin]:
    pins = []
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        words = line.split()
        cut = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
        spec, options = " ".join(words[:cut]), words[cut:]
        if not spec:
            raise LockError(f"{where}: {line[:60]}: an option without a requirement (rule: one pin a line)")
        req = Requirement(spec)
        exact = [s for s in req.specifier if s.operator == "=="]
        if len(exact) != 1 or len(req.specifier) != 1 or req.url or req.extras:
            raise LockError(f"{where}: {spec}: not pinned to one version (rule: name==version [; marker])")
        bad = [o for o in options if not HASH.match(o)]
        if bad:
            raise LockError(f"{where}: {req.name}: {bad[0][:40]}: not a --hash=sha256: (rule: hashes only)")
        if not options:
            raise LockError(f"{where}: {req.name}: no --hash (rule: every pin hashed, pip --require-hashes)")
        marker = str(req.marker) if req.marker else ""
        name = canonicalize_name(req.name)
        pins.append(Pin(name, exact[0].version, marker, tuple(o.split(":", 1)[1] for o in options), number))
    if not pins:
        raise LockError(f"{source}: no pins")
    return pins


def read(path: Path = LOCK) -> list[Pin]:
    return parse(path.read_text(), str(path))


def here(pins: list[Pin], env: dict[str, str] | None = None) -> dict[str, Pin]:
    """The pins that hold for this interpreter (or `env`), by name; two for one name is an error."""
    out: dict[str, Pin] = {}
    for pin in pins:
        if pin.holds(env):
            if pin.name in out:
                raise LockError(
                    f"lock line {pin.line}: {pin.name}: a second pin holds here (line {out[pin.name].line})"
                )
            out[pin.name] = pin
    return out


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def drift(pins: list[Pin]) -> list[str]:
    """How this interpreter's installed distributions differ from the lock's pins that hold here."""
    out = []
    for name, pin in sorted(here(pins).items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(f"{name} missing (lock {pin.version})")
            continue
        if not same_version(have, pin.version):
            out.append(f"{name} {have} installed, lock {pin.version}")
    return out


def _side(pins: list[Pin]) -> str:
    return ", ".join(f"{p.version}" + (f" ({p.marker})" if p.marker else "") for p in pins) or "(absent)"


def moved(old: list[Pin], new: list[Pin]) -> list[str]:
    """One line per package whose pins differ: `name old -> new` (markers where several)."""
    out = []
    for name in sorted({p.name for p in old} | {p.name for p in new}):
        a = sorted((p for p in old if p.name == name), key=Pin.key)
        b = sorted((p for p in new if p.name == name), key=Pin.key)
        if [(p.version, p.marker) for p in a] != [(p.version, p.marker) for p in b]:
            out.append(f"{name} {_side(a)} -> {_side(b)}")
        elif [set(p.hashes) for p in a] != [set(p.hashes) for p in b]:
            out.append(f"{name} {_side(a)}: the same version, other files (hashes)")
    return out


def project_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    extra = project.get("optional-dependencies", {})
    return [
        Requirement(r) for r in [*project["dependencies"], *(r for e in EXTRAS for r in extra.get(e, []))]
    ]


def _wanted(req: Requirement, extras: set[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""})


def _covered(req: Requirement, pinned: dict[str, Pin], needer: str) -> str | None:
    """Why the lock does not satisfy `req` here, or None."""
    name = canonicalize_name(req.name)
    if OUTSIDE.match(name):
        return None
    pin = pinned.get(name)
    if pin is None:
        return f"{needer} needs {req}: not in the lock"
    if not req.specifier.contains(pin.version, prereleases=True):
        return f"{needer} needs {req}: the lock has {pin.version}"
    return None


def coverage(pins: list[Pin], pyproject: Path = ROOT / "pyproject.toml") -> tuple[list[str], int]:
    """What the lock misses on this interpreter: pyproject's requirements (+dev), then their whole
    closure as the installed distributions declare it (where installed at the lock's version), torch's
    included; a pin nothing here needs (once every pin could be walked); any pin of torch or a CUDA
    wheel. Returns (problems, distributions walked)."""
    problems = [
        f"lock line {p.line}: {p.name}: outside the lock (torch and its CUDA wheels)"
        for p in pins
        if OUTSIDE.match(p.name)
    ]
    pinned = here(pins)
    queue = [(r, "pyproject.toml") for r in project_requirements(pyproject) if _wanted(r, set())]
    seen: set[tuple[str, frozenset[str]]] = set()
    walked: set[str] = set()
    while queue:
        req, needer = queue.pop()
        if problem := _covered(req, pinned, needer):
            problems.append(problem)
            continue
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: its own requirements cannot be read (drift says so)
        if name in pinned and not same_version(have, pinned[name].version):
            continue
        walked.add(name)
        for text in metadata.requires(name) or []:
            child = Requirement(text)
            if _wanted(child, set(extras)):
                queue.append((child, f"{name} {have}"))
    reached = {n for n, _ in seen}
    if reached & set(pinned) <= walked:  # every reached pin walked: what was not reached, nothing needs
        problems += [
            f"lock line {pinned[n].line}: {n}: pinned, but nothing here needs it"
            for n in set(pinned) - reached
        ]
    return sorted(set(problems)), len(walked)


def target_env(python: str, machine: str = "x86_64") -> dict[str, str]:
    """Marker values of CPython `python` (3.12 or 3.12.1) on Linux `machine`."""
    full = python if python.count(".") == 2 else f"{python}.0"
    return {
        "python_version": ".".join(full.split(".")[:2]),
        "python_full_version": full,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "platform_release": "",
        "platform_version": "",
        "implementation_version": full,
        "extra": "",
    }


def requirements_for(pins: list[Pin], env: dict[str, str] | None) -> str:
    """A hash-checked requirements file of the pins that hold in `env` (markers dropped)."""
    return "".join(
        f"{p.name}=={p.version} " + " ".join(f"--hash=sha256:{h}" for h in p.hashes) + "\n"
        for _, p in sorted(here(pins, env).items())
    )


def main(argv: list[str]) -> int:
    cmd, args = (argv[0], argv[1:]) if argv else ("check", [])
    try:
        if cmd == "moved" and len(args) == 2:
            lines = moved(read(Path(args[0])), read(Path(args[1])))
            print(f"refresh: {len(lines)} packages moved (old -> new){':' if lines else ''}")
            for line in lines:
                print(f"  {line}")
            return 0
        if cmd == "for" and 1 <= len(args) <= 2:
            print(requirements_for(read(Path(args[1]) if args[1:] else LOCK), target_env(args[0])), end="")
            return 0
        if cmd == "pick" and args:
            wanted = {canonicalize_name(a) for a in args}
            print(requirements_for([p for p in read() if p.name in wanted], None), end="")
            return 0
        pins = read(Path(args[0]) if args else LOCK)
        if cmd == "drift":
            lines = drift(pins)
        elif cmd == "check":
            lines, walked = coverage(pins)
            if not lines:
                n = len(here(pins))
                print(
                    f"lock: {len(pins)} pins ({n} for this interpreter), every one hashed; pyproject (+dev) and "
                    f"the installed closure of {walked} distributions covered; no torch or CUDA wheel"
                )
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (LockError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for line in lines:
        print(f"lock: {line}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
