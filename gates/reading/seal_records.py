"""What the seals gate judges, read: the stages in scope (the selected gates' and every stage upstream
of them), what dvc.lock lacks, every sealed file hashed against its dvc.lock md5, what `dvc status`
says changed (gates/reading/dvcstatus.py) and which frozen stages changed, and what dvc.yaml lacks of
the declared scope (gates/reading/scope.py). Every read, hash and scope computation is here; the judge
(gates/judges/seals.py) decides from the plain results, in the order it always did: a read that could
only fail after an earlier verdict is kept as that read's failure (gates/reading/deferred.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gates.reading import dvcstatus
from gates.reading.artifacts import Artifacts
from gates.reading.deferred import Deferred, deferred
from gates.reading.dvclock import DvcLock, dir_md5
from gates.reading.dvcstatus import Change
from gates.reading.scope import Sources, declared_stages, required_stages, scope_problems
from registry.store import FileCheck

Changes = dict[str, list[Change]]  # stage -> what changed (dvcstatus.status / dvcstatus.frozen)


@dataclass(frozen=True)
class SealRecords:
    stages: list[str]  # the stages sealed: in scope (every stage, or the selected gates' and upstream)
    declared: list[str] | None  # the stages the project declares its verdict needs (None: none)
    scope_problems: list[str]  # what dvc.yaml lacks of the declared scope (gates/reading/scope.py)
    hashed: Deferred[None]  # hashing every sealed file ahead: its failure, raised after the scope
    gaps: Deferred[list[str]]  # what dvc.lock lacks: a stage, an out
    differences: Deferred[tuple[int, list[str]]]  # (files hashed, why each sealed path differs)
    status: Deferred[Changes]  # what `dvc status` says changed, per stage
    frozen: Deferred[Changes]  # the frozen stages' changes ([]: frozen and unchanged)


@dataclass(frozen=True)
class SealRows:
    """The picture's rows: each sealed path and each changed file dep, dvc.lock's md5 and today's."""

    rows: list[FileCheck]


def upstream(lock: DvcLock, stages: set[str]) -> set[str]:
    """`stages` and every stage whose out one of them depends on (per dvc.lock's deps), transitively."""
    outs = {o.get("path", ""): s for s, body in lock.stages.items() for o in (body or {}).get("outs") or []}
    todo, seen = list(stages), set(stages)
    while todo:
        body = lock.stages.get(todo.pop()) or {}
        for dep in body.get("deps") or []:
            d = dep.get("path", "")
            for path, stage in outs.items():
                inside = d == path or d.startswith(path + "/") or path.startswith(d + "/")
                if inside and stage not in seen:
                    seen.add(stage)
                    todo.append(stage)
    return seen


def in_scope(lock: DvcLock, scope: list[str] | None) -> list[str]:
    """The stages to seal: every stage of dvc.yaml and dvc.lock, or the selected gates' and their inputs'."""
    every = set(lock.pipeline) | set(lock.stages) | lock.committed
    if scope is None:
        return sorted(every)
    return sorted(upstream(lock, set(scope) & every) | (set(scope) & every))


def missing(lock: DvcLock, stages: list[str]) -> list[str]:
    """What dvc.lock lacks: a stage dvc.yaml defines (or git HEAD's dvc.lock had), an out of one."""
    problems = []
    for stage in stages:
        if stage not in lock.stages:
            if stage in lock.pipeline or stage in lock.committed:
                problems.append(f"stage {stage} has no entry (dvc repro {stage})")
            continue
        recorded = {o.get("path") for o in (lock.stages[stage] or {}).get("outs") or []}
        problems += [
            f"stage {stage}: out {p} has no entry (dvc repro {stage})"
            for p in lock.pipeline.get(stage, [])
            if p not in recorded
        ]
    return problems


def sealed_paths(lock: DvcLock, stages: list[str]) -> list[tuple[str, str]]:
    """(path, recorded md5) of every out of `stages`, and of every folder dep that is no stage's out
    (registry/models, registry/pinned: the registry's content, sealed by the stages that read it)."""
    bodies = [lock.stages.get(s) or {} for s in stages]
    paths = {str(o.get("path", "")): str(o.get("md5", "")) for b in bodies for o in b.get("outs") or []}
    for body in bodies:
        for dep in body.get("deps") or []:
            path, md5 = str(dep.get("path", "")), str(dep.get("md5"))  # no md5: "None", no folder
            if md5.endswith(".dir") and lock.out(path) is None:
                paths.setdefault(path, md5)
    return sorted(paths.items())


def differences(lock: DvcLock, path: str, recorded: str) -> tuple[int, list[str]]:
    """(files hashed, why each differs) for one sealed path."""
    full = lock.root / path
    if not recorded.endswith(".dir"):
        if not full.is_file():
            return 0, [f"{path}: missing, dvc.lock recorded md5 {recorded}"]
        md5 = lock.md5(path)
        return 1, [] if md5 == recorded else [f"{path}: md5 {md5}, dvc.lock recorded {recorded}"]
    if not full.is_dir():
        return 0, [f"{path}: missing folder, dvc.lock recorded {recorded}"]
    return len(lock.listing(path)), lock.folder_changes(path, recorded)


def all_differences(lock: DvcLock, sealed: list[tuple[str, str]]) -> tuple[int, list[str]]:
    """(files hashed, why each differs) over every sealed path, in order."""
    files, problems = 0, []
    for path, recorded in sealed:
        n, why = differences(lock, path, recorded)
        files, problems = files + n, problems + why
    return files, problems


def prefetch(lock: DvcLock, paths: list[tuple[str, str]]) -> None:
    """Hash every sealed file on two threads (hashlib releases the GIL on large blocks): most of the
    bytes are checkpoints, and one core alone took 0.5 s for the pipeline's 107 MB."""
    files = []
    for path, _ in paths:
        full = lock.root / path
        if full.is_file():
            files.append(path)
        elif full.is_dir():
            files += [p.relative_to(lock.root).as_posix() for p in full.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(max_workers=2) as pool:  # pragma: no mutate -- equivalent: threads, not results
        # pragma: no mutate start -- equivalent: the order of hashing (largest first) changes no digest
        list(pool.map(lock.md5, sorted(files, key=lambda f: -(lock.root / f).stat().st_size)))
        # pragma: no mutate end


def scope_while_hashing(
    a: Artifacts, declared: list[str] | None, sealed: list[tuple[str, str]]
) -> tuple[list[str], Deferred[None]]:
    """What dvc.yaml lacks of the scope, while the sealed files hash on another thread: parsing the code
    (~0.1 s) holds the GIL, hashing the outs (~0.1-0.2 s) mostly does not, so on two cores the two
    overlap. The hashing's failure is kept: the scope is the first verdict, a file unhashable later."""
    with ThreadPoolExecutor(max_workers=1) as pool:  # pragma: no mutate -- equivalent: threads, not results
        hashed = pool.submit(prefetch, a.lock, sealed)
        problems = scope_problems(a.lock.definitions, declared, Sources(a.root))
    return problems, deferred(hashed.result)


def seal_records(a: Artifacts, declared: list[str] | None = None) -> SealRecords:
    """Every record the seals judge, for the declared scope `declared` (None: none declared)."""
    lock = a.lock
    stages = in_scope(lock, a.scope)
    sealed = sealed_paths(lock, stages)
    problems, hashed = scope_while_hashing(a, declared, sealed)
    return SealRecords(
        stages,
        declared,
        problems,
        hashed,
        deferred(lambda: missing(lock, stages)),
        deferred(lambda: all_differences(lock, sealed)),
        deferred(lambda: dvcstatus.status(lock, stages)),
        deferred(lambda: dvcstatus.frozen(lock, stages)),
    )


def declared_scope(a: Artifacts, t: dict[str, Any]) -> list[str] | None:
    """The declared scope: the params file's and git HEAD's (`gates.scope.stages`), or None."""
    return required_stages(t, a.root, a.params.source) if a.params else declared_stages(t)


def read_seals(a: Artifacts, t: dict[str, Any]) -> SealRecords:
    return seal_records(a, declared_scope(a, t))


def recorded_md5(lock: DvcLock, c: Change) -> str:
    dep = dvcstatus.entries(lock.stages.get(c.stage) or {}, "deps").get(c.name) or {}
    return str(dep.get("md5", "(no entry)"))


def read_seal_rows(a: Artifacts, t: dict[str, Any] | None = None) -> SealRows:
    """Each sealed path: dvc.lock's md5 against the tree's (a folder: its `.dir` hash), and each file
    dep `dvc status` finds changed."""
    lock = a.lock
    rows = []
    for path, recorded in sealed_paths(lock, in_scope(lock, a.scope)):
        full = lock.root / path
        if recorded.endswith(".dir"):
            now = dir_md5(lock.listing(path)) if full.is_dir() else None
            name = f"{path}/ ({len(lock.listing(path))} files)"  # a missing folder lists no file
        else:
            now, name = (lock.md5(path) if full.is_file() else None), path
        rows.append(FileCheck(name, recorded, now))
    changes = dvcstatus.status(lock, in_scope(lock, a.scope)).values()
    deps = {c.name: c for cs in changes for c in cs if c.kind == "dep"}
    rows += [
        FileCheck(f"{c.name} (dep)", recorded_md5(lock, c), dvcstatus.md5_now(lock, c.name))
        for c in deps.values()
    ]
    return SealRows(rows)
