"""gates/judges/fresh_train.py's entry points and pictures, in-process (issue #37: they were reached only
through `python -m gates check` subprocesses, so mutation testing saw no test of them).

A hand-written tree (runs/single/metrics.json, exports/fresh with its manifest, a registry of goldens
from tests/judge_trees.py) judged by fresh_train() and drawn by fresh_train_picture(); the records are
read without the metrics schema (as tests/unit/test_judge_consistency.py does), so each test changes one
thing. The weights comparison, the grad-norm check and the exact tier's messages are judged directly.
tests/unit/test_judge_fresh_train.py holds the choice of golden and the tiers' bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import artifact_table
from gates.judges import fresh_train as ft
from gates.judges import plots
from gates.judges.fresh_train import GATE, Weights, _exact, _grad_norm_diff
from gates.judges.gate import NoPicture, Picture
from gates.judges.outcome import Outcome
from gates.reading import exports, registry_records
from gates.reading.artifacts import ArtifactError, Artifacts
from gates.reading.exports import export_files, own_project, read_fresh_train
from gates.reading.goldens import Choice
from gates.reading.registry_records import Golden, GoldenChoice, choose_golden
from judge_trees import Tree, make_golden, make_registry, write_export
from params.config import Params
from params.identity import config_identity
from registry.store import Entry, Registry, RegistryError

CONFIG = {"seed": 1, "model": {"vocab_size": 300}, "train": {"steps": 4, "eval_every": 2}}
CPU = {"loss_rtol": 1e-4, "max_steps_out": 1, "eval_rtol": 1e-3}
CUDA = {"loss_rtol": 1e-3, "max_steps_out": 0, "eval_rtol": 1e-4, "prefix_steps": 2, "final_val_atol": 0.08}
POLICY = {"unblessed": "fail", "approx": {"cpu": CPU, "cuda": CUDA}}
DIGEST = "d" * 64


def metrics(**changes: Any) -> dict[str, Any]:
    """A single-device record that agrees with itself (gates/reading/expect.py): 4 steps, evals 0, 2, 4."""
    m = {
        "launcher": "single",
        "world": 1,
        "config": CONFIG,
        "config_hash": config_identity(CONFIG),
        "steps": 4,
        "train_loss": [4.0, 3.5, 3.0, 2.5],
        "grad_norm": [1.0, 2.0, 3.0, 4.0],
        "lr": [0.1] * 4,
        "samples": {"count": [8] * 4, "hash_sum": [1, 2, 3, 4], "dropout_hash_sum": [0] * 4},
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}],
        "cross_rank": {"max_abs_diff": 0.0, "per_rank": [{"rank": 0, "max_abs_diff": 0.0}]},
        "env": {"env_id": "cpu-own"},
        "device": "cpu",
        "precision": "fp32",
        "param_digest": DIGEST,
        "eval_mode_steps": [],
    }
    m.update(changes)
    return m


HASH = config_identity(CONFIG)


def fresh_train(a: Artifacts, policy: dict[str, Any]) -> Outcome:
    """The gate on a tree: read (gates/reading/exports.py), then judged."""
    return ft.fresh_train(read_fresh_train(a, {}), policy)


def fresh_train_picture(a: Artifacts, t: dict[str, Any]) -> Picture:
    return GATE.draw(a, t)


def golden_for(reg: Registry, m: dict[str, Any]) -> Golden | None:
    return choose_golden(reg, m)[0].golden


def write_run(tree: Tree, m: dict[str, Any]) -> None:
    base = tree.root / "runs" / "single"
    base.mkdir(parents=True, exist_ok=True)
    (base / "metrics.json").write_text(json.dumps(m))
    tree.stages["train_single"] = {"outs": []}


def add_export(tree: Tree) -> dict[str, str]:
    """exports/fresh and its stage; the md5 of each file (what a golden of this export holds)."""
    manifest = write_export(tree.root / "exports" / "fresh")
    tree.stages["export"] = {"outs": []}
    return {n: f["md5"] for n, f in manifest["files"].items()}


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch) -> Tree:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    t = Tree(tmp_path, params=None)
    write_run(t, metrics())
    make_registry(tmp_path / "registry")
    return t


def reg_of(tree: Tree) -> Registry:
    return Registry(tree.root / "registry")


def choice(data: dict[str, Any], tier: str = "exact", cross_env: bool = False) -> Choice:
    return Choice(Entry(Path("g/v1.json"), {"env_id": "cpu-own", "version": 1, **data}), tier, cross_env)


def golden_data(**extra: Any) -> dict[str, Any]:
    values = lambda d: {"values": {str(k): v for k, v in d.items()}}  # noqa: E731
    return {
        "metrics": {
            "train_loss": values(dict(enumerate([4.0, 3.5, 3.0, 2.5]))),
            "val_loss": values({0: 4.5, 2: 3.5, 4: 2.0}),
        },
        **extra,
    }


# -- the final weights ------------------------------------------------------------------------------------


def test_weights_compare_export_md5s_when_both_have_an_export() -> None:
    g = golden_data(export={"files": {"a": "1" * 32, "b": "2" * 32}}, run={"param_digest": "x"})
    w = Weights.of(metrics(), g, {"a": "1" * 32, "b": "3" * 32, "c": "4" * 32})
    assert w == Weights("export files", ["b", "c"], 3)
    assert w.not_applied({}) == {}
    assert Weights.of(metrics(), g, {"a": "1" * 32, "b": "2" * 32}) == Weights("export files", [], 2)


def test_weights_fall_back_to_the_parameter_digest_of_a_golden_of_the_run() -> None:
    run = golden_data(run={"param_digest": DIGEST})
    assert Weights.of(metrics(), run, None) == Weights("parameter digest", [], 1)
    assert Weights.of(metrics(param_digest="e" * 64), run, None) == Weights(
        "parameter digest", ["param_digest"], 1
    )
    both = golden_data(run={"param_digest": DIGEST}, export={"files": {"a": "1" * 32}})
    assert Weights.of(metrics(), both, None) == Weights("parameter digest", [], 1)  # no export here
    assert Weights.of(metrics(), run, {"a": "1" * 32}) == Weights("parameter digest", [], 1)  # none there
    assert Weights.of(metrics(), run, None).not_applied(None) == {}


def test_weights_not_compared_say_why() -> None:
    g = golden_data(export={"files": {"a": "1" * 32}})
    w = Weights.of(metrics(), g, None)
    assert w == Weights("", [], 0)
    assert w.not_applied(None) == {
        "final weights": "the golden holds export md5s only and this project has no export stage: "
        "losses judged alone"
    }
    assert Weights.of(metrics(), golden_data(), {"a": "1" * 32}) == Weights("", [], 0)
    assert w.not_applied({"a": "1" * 32}) == {
        "final weights": "the golden holds export md5s only and the golden has none: losses judged alone"
    }


# -- the grad norms (exact tier) ----------------------------------------------------------------------------


def norms_golden(values: dict[int, float]) -> dict[str, Any]:
    g = golden_data()
    g["metrics"]["grad_norm"] = {"values": {str(s): v for s, v in values.items()}}
    return g


def test_grad_norms_are_judged_only_where_the_golden_records_them() -> None:
    assert _grad_norm_diff(metrics(grad_norm=[9.0] * 4), golden_data()) == ""
    assert _grad_norm_diff(metrics(), norms_golden({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})) == ""


def test_grad_norms_name_the_first_differing_step_in_step_order_and_the_ratio() -> None:
    ref = {s: float(s + 1) for s in range(12)}
    got = [float(s + 1) for s in range(12)]
    got[2], got[10] = 6.0, 22.0
    g = norms_golden(dict(sorted(ref.items(), key=lambda kv: str(kv[0]))))  # stored "0","1","10",...
    assert _grad_norm_diff(metrics(grad_norm=got), g) == (
        "grad_norm differs at 2 steps, first step 2 (golden 3.0, run 6.0, x2)"
    )


def test_grad_norms_against_a_zero_golden_norm_give_no_ratio() -> None:
    g = norms_golden({0: 0.0, 1: 2.0, 2: 3.0, 3: 4.0})
    assert _grad_norm_diff(metrics(grad_norm=[0.5, 2.0, 3.0, 4.0]), g) == (
        "grad_norm differs at 1 steps, first step 0 (golden 0.0, run 0.5)"
    )


# -- the exact tier's messages --------------------------------------------------------------------------------


def test_exact_pass_names_grad_norms_and_the_digest() -> None:
    g = norms_golden({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})
    g["run"] = {"param_digest": DIGEST}
    o = _exact(metrics(), g, None, choice(g))
    assert (o.status, o.measured, o.threshold, o.not_applied) == ("pass", "bitwise", "exact", {})
    assert o.message == (
        "exact tier vs golden cpu-own v1: 4 losses, grad norms, 3 val losses and 1 parameter digest "
        "bit-identical"
    )


def test_exact_pass_without_weights_says_what_was_not_applied() -> None:
    g = golden_data(export={"files": {"a": "1" * 32}})
    o = _exact(metrics(), g, None, choice(g))
    why = "the golden holds export md5s only and this project has no export stage: losses judged alone"
    assert (o.status, o.not_applied) == ("pass", {"final weights": why})
    assert o.message == (
        f"exact tier vs golden cpu-own v1: 4 losses, 3 val losses bit-identical; final weights: not applied: {why}"
    )


def test_exact_fails_on_grad_norms_alone_and_on_the_digest_alone() -> None:
    g = norms_golden({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})
    o = _exact(metrics(grad_norm=[1.0, 2.0, 3.0, 5.0]), g, {"a": "1" * 32}, choice(g))
    why = "the golden holds export md5s only and the golden has none: losses judged alone"
    assert (o.status, o.measured, o.not_applied) == (
        "fail",
        "0 steps, 0 files differ",
        {"final weights": why},
    )
    assert o.message.startswith(
        "exact tier vs golden cpu-own v1: grad_norm differs at 1 steps, first step 3 (golden 4.0, run 5.0, "
        "x1.25). This environment"
    )
    g = golden_data(run={"param_digest": "e" * 64})
    o = _exact(metrics(), g, None, choice(g))
    assert (o.status, o.measured, o.not_applied) == ("fail", "0 steps, 1 parameter digest differ", {})
    assert o.message.startswith("exact tier vs golden cpu-own v1: parameter digest differ: param_digest. ")


def test_exact_names_grad_norms_before_the_losses() -> None:
    g = norms_golden({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})
    o = _exact(metrics(grad_norm=[2.0, 2.0, 3.0, 4.0], train_loss=[4.0, 3.5, 3.0, 2.0]), g, None, choice(g))
    assert o.message.startswith(
        "exact tier vs golden cpu-own v1: grad_norm differs at 1 steps, first step 0 (golden 1.0, run 2.0, "
        "x2); first differing step 3 (golden 2.5, run 2.0), 1 steps differ, max rel 0.2. "
    )
    assert o.measured == "1 steps, 0 files differ"


# -- the gate on a tree -------------------------------------------------------------------------------------------


def test_a_run_equal_to_its_own_golden_passes_and_the_golden_is_recorded(tree: Tree) -> None:
    md5 = add_export(tree)
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH, files=md5)
    a = tree.artifacts()
    o = fresh_train(a, POLICY)
    assert (o.status, o.measured, o.threshold, o.not_applied) == ("pass", "bitwise", "exact", {})
    assert o.message == (
        "exact tier vs golden cpu-own v1: 4 losses, 3 val losses and 7 export files bit-identical"
    )
    rel = "registry/goldens/cpu-own/v1.json"
    assert rel in a.read and a.read[rel]["md5"] == tree.artifacts().lock.md5(rel)
    assert "exports/fresh/model.safetensors" in a.read and "exports/fresh/manifest.json" in a.read


def test_an_export_that_differs_from_the_golden_fails_the_exact_tier(tree: Tree) -> None:
    md5 = add_export(tree)
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH, files={**md5, "model.gguf": "0" * 32})
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, o.measured) == ("fail", "0 steps, 1 export files differ")
    assert o.message.startswith("exact tier vs golden cpu-own v1: export files differ: model.gguf. ")


def test_a_project_without_export_is_judged_by_the_losses_alone(tree: Tree) -> None:
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH)
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, list(o.not_applied)) == ("pass", ["final weights"])
    assert "this project has no export stage" in o.message


def test_an_export_edited_after_its_manifest_is_an_error(tree: Tree) -> None:
    add_export(tree)
    (tree.root / "exports" / "fresh" / "config.json").write_text("{}")
    with pytest.raises(ArtifactError, match=r"^exports/fresh/config\.json: md5 [0-9a-f]{32}, its manifest "
                       r"lists [0-9a-f]{32} \(re-export with dvc repro export\)$"):  # fmt: skip
        export_files(tree.artifacts())
    (tree.root / "exports" / "fresh" / "extra.bin").write_text("x")
    with pytest.raises(ArtifactError, match=r"md5 [0-9a-f]{32}, its manifest lists [0-9a-f]{32}; "
                       r"exports/fresh/extra\.bin: md5 [0-9a-f]{32}, its manifest lists \(absent\) \(re-export"):  # fmt: skip
        export_files(tree.artifacts())


def test_export_files_are_the_folders_md5s_without_the_manifest(tree: Tree) -> None:
    assert export_files(tree.artifacts()) is None
    md5 = add_export(tree)
    assert export_files(tree.artifacts()) == md5 and "manifest.json" not in md5
    tree.stages.pop("export")
    tree.stages["other"] = {"outs": []}
    a = tree.artifacts()
    a.lock.pipeline["export"] = ["exports/fresh"]  # dvc.yaml has the stage, dvc.lock does not record it
    with pytest.raises(ArtifactError, match=r"dvc\.lock has no entry for stage export"):
        export_files(a)


def test_a_run_that_contradicts_its_record_is_refused_before_any_golden(tree: Tree) -> None:
    write_run(tree, metrics(config_hash="f" * 16))
    make_golden(reg_of(tree), "cpu-own", config_hash="f" * 16)
    a = tree.artifacts()
    o = fresh_train(a, POLICY)
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message.startswith(f"runs/single/metrics.json: config_hash: {'f' * 16} is not the identity")
    assert o.message.endswith(
        "Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )
    assert not [r for r in a.read if r.startswith("registry/")]


def test_without_a_golden_the_policy_decides_naming_the_env_and_config(tree: Tree) -> None:
    for unblessed in ("fail", "skip"):
        o = fresh_train(tree.artifacts(), {**POLICY, "unblessed": unblessed})
        assert (o.status, o.measured) == (unblessed, "unblessed")
        assert o.message.startswith(f"unblessed: no golden for environment cpu-own nor for config {HASH} on")
    make_golden(reg_of(tree), "cpu-own", config_hash="old")
    o = fresh_train(tree.artifacts(), {**POLICY, "unblessed": "skip"})
    assert (o.status, o.threshold) == ("fail", "exact")
    assert o.message.startswith(f"golden cpu-own v1 was blessed for config old, this run is {HASH}, and")


def test_a_golden_that_does_not_cover_the_config_is_refused(tree: Tree) -> None:
    make_golden(reg_of(tree), "cpu-b", config_hash=HASH, tier="approx", train=[4.0, 3.5, 3.0])
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, o.measured, o.threshold) == ("fail", None, "approx")
    assert o.message == (
        "golden cpu-b v1 holds train losses for 3 steps, the config has 4: refusing to judge against it"
    )
    make_golden(reg_of(tree), "cpu-b", config_hash=HASH, train=[4.0, 3.5, 3.0], val={0: 4.5, 2: 3.5})
    assert fresh_train(tree.artifacts(), POLICY).message == (
        "golden cpu-b v2 holds train losses for 3 steps, the config has 4; golden cpu-b v2 holds val losses "
        "at steps ['0', '2'], the config implies ['0', '2', '4']: refusing to judge against it"
    )


def test_another_environments_golden_judges_with_the_runs_device_tolerance(tree: Tree) -> None:
    make_golden(reg_of(tree), "cuda-b", config_hash=HASH, device_type="cuda")
    write_run(tree, metrics(device="cuda", train_loss=[4.0, 3.5, 9.0, 9.0]))
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, o.measured) == ("pass", "0 steps out")
    assert o.threshold == (
        "approx vs cuda-b v1: rtol 0.001 over the first 2 steps, <= 0 out, val@0 rtol 0.0001, "
        "|final val diff| <= 0.08"
    )
    assert "(another environment's golden)" in o.message and o.message.endswith("final weights not compared")
    write_run(tree, metrics(device="cpu", train_loss=[4.0, 3.5, 9.0, 9.0]))
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, o.measured) == ("fail", "2 steps out")
    assert o.threshold == "approx vs cuda-b v1: rtol 0.0001, <= 1 steps out, eval rtol 0.001"


class Broken(Registry):
    def golden(self, env_id: str):
        raise RegistryError(f"registry/goldens/{env_id}: unreadable")


def test_a_registry_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    c, entry = choose_golden(Broken(tmp_path), metrics())
    assert (c, entry) == (GoldenChoice(problem="registry/goldens/cpu-own: unreadable"), None)
    o = ft.judge(metrics(), c, POLICY, None, "fail")
    assert (o.status, o.measured, o.threshold, o.message) == (
        "error",
        None,
        None,
        "registry/goldens/cpu-own: unreadable",
    )


def test_the_choice_names_the_golden_it_judges_against(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    make_golden(reg, "cpu-own", config_hash=HASH)
    c, entry = choose_golden(Registry(reg.root), metrics())
    assert entry is not None and entry.data == c.golden.data
    assert (c.golden.name, c.golden.tier, c.golden.cross_env, c.coverage) == (
        "cpu-own v1",
        "exact",
        False,
        (),
    )
    assert ft.judge(metrics(), c, POLICY, None, "fail").status == "pass"
    c, entry = choose_golden(Registry(reg.root), metrics(config_hash="x"))
    assert (c.golden, entry) == (None, None)
    assert ft.judge(metrics(config_hash="x"), c, POLICY, None, "skip").status == "fail"


def test_the_unblessed_policy_of_a_project_of_its_own(tree: Tree) -> None:
    own = lambda raw, defaults: Params(raw, "params.yaml", defaults)  # noqa: E731
    cases = [
        (None, "fail"),
        (own({"gates": {}}, ("fresh_train",)), "skip"),  # left to the harness: not held to our 'fail'
        (own({"gates": {}}, ("ddp",)), "fail"),  # its own fresh_train section: its own word
        (own({"train": {}}, ("fresh_train",)), "fail"),  # our pipeline's params.yaml
    ]
    for params, want in cases:
        tree.params = params
        assert own_project(params) == (want == "skip")
    tree.params = None
    assert fresh_train(tree.artifacts(), POLICY).status == "fail"
    assert fresh_train(tree.artifacts(), {**POLICY, "unblessed": "skip"}).status == "skip"


def test_the_gate_reads_its_own_section(tree: Tree) -> None:
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH)
    assert GATE.run(tree.artifacts(), {"fresh_train": POLICY}).status == "pass"
    assert GATE.threshold({"fresh_train": POLICY}) == (
        "exact (own environment's golden) or approximate (another's): cpu rtol 0.0001, <= 1 steps out, "
        "eval rtol 0.001, cuda rtol 0.001 over the first 2 steps, <= 0 out, val@0 rtol 0.0001, "
        "|final val diff| <= 0.08"
    )


def test_golden_for_passes_the_runs_device_and_precision(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    make_golden(reg, "a-cuda-fp32", config_hash=HASH, device_type="cuda", precision="fp32")
    make_golden(reg, "b-cpu-bf16", config_hash=HASH, device_type="cpu", precision="bf16")
    make_golden(reg, "c-cpu-fp32", config_hash=HASH, device_type="cpu", precision="fp32")
    pick = lambda **kw: golden_for(Registry(reg.root), metrics(**kw)).name  # noqa: E731
    assert pick() == "c-cpu-fp32 v1"
    assert pick(precision="bf16") == "b-cpu-bf16 v1"
    assert pick(device="cuda", precision="bf16") == "a-cuda-fp32 v1"


# -- the picture ------------------------------------------------------------------------------------------------


@pytest.fixture()
def drawn(monkeypatch) -> dict[str, list]:
    """What the picture drew: each plots helper's arguments (the real helper still draws) and the figure."""
    import matplotlib.pyplot as plt

    calls: dict[str, list] = {"figure": [], "overlay": [], "log_limit_plot": [], "fig": []}

    def spy(name: str) -> None:
        real = getattr(plots, name)

        def record(*args: Any, **kw: Any) -> Any:
            calls[name].append((args, kw))
            return real(*args, **kw)

        monkeypatch.setattr(plots, name, record)

    for name in ("figure", "overlay", "log_limit_plot"):
        spy(name)
    monkeypatch.setattr(plots, "to_svg", lambda fig: calls["fig"].append(fig) or "<svg/>")
    yield calls
    plt.close("all")


T = {"fresh_train": POLICY}


def test_the_exact_picture_draws_every_step_against_the_golden_and_the_export_table(
    tree: Tree, drawn: dict[str, list]
) -> None:
    md5 = add_export(tree)
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH, files={**md5, "model.gguf": "0" * 32},
                train=[4.0, 3.5, 3.0, 2.5, 2.0])  # fmt: skip
    write_run(tree, metrics(train_loss=[4.0, 3.5, 3.25, 2.5]))
    pic = fresh_train_picture(tree.artifacts(), T)
    assert drawn["figure"] == [((2, 1), {})]
    (top, steps, want, got, labels, marked), _ = drawn["overlay"][0]
    assert (steps, want, got, labels, marked) == (
        [0, 1, 2, 3], [4.0, 3.5, 3.0, 2.5], [4.0, 3.5, 3.25, 2.5], ("golden v1", "this run"), [2]
    )  # fmt: skip
    (bottom, xs, rel, limit, label, limit_label), _ = drawn["log_limit_plot"][0]
    assert (xs, rel, limit, label, limit_label) == (
        [0, 1, 2, 3], [0.0, 0.0, 0.25 / 3, 0.0], plots.ZERO_FLOOR * 10, "run vs golden", "exact: any difference"
    )  # fmt: skip
    assert (top.get_title(), top.get_ylabel()) == (
        "runs/single vs golden cpu-own v1 (exact tier)", "train loss (nats/token)"
    )  # fmt: skip
    assert (bottom.get_xlabel(), bottom.get_ylabel()) == ("step", "relative difference")
    assert drawn["fig"] == [top.figure]
    assert pic.html.startswith("<svg/><table class='files'><tr><th>file</th><th>golden md5</th>")
    assert "<tr class='bad'><td>model.gguf</td><td><code>" + "0" * 32 in pic.html
    assert pic.html.count("<tr class='ok'>") == 6
    assert pic.caption == (
        "Top: this run's training loss against the golden's (nats per token), differing steps marked ×. "
        "Bottom: relative difference per step (log scale; 0 drawn at 1e-12). Table: exports/fresh against "
        "the golden's export md5s. Pass (exact tier): every loss bit-identical (no ×) and the final "
        "weights equal. 1 of 4 steps differ."
    )


def test_the_approximate_picture_marks_only_the_judged_prefix(tree: Tree, drawn: dict[str, list]) -> None:
    make_golden(reg_of(tree), "cuda-b", config_hash=HASH, device_type="cuda")
    write_run(tree, metrics(device="cuda", train_loss=[4.0, 3.6, 9.0, 9.0]))
    pic = fresh_train_picture(tree.artifacts(), T)
    (top, *_, marked), _ = drawn["overlay"][0]
    assert marked == [1] and top.get_title() == "runs/single vs golden cuda-b v1 (approx tier)"
    (_, _, _, limit, _, limit_label), _ = drawn["log_limit_plot"][0]
    assert (limit, limit_label) == (1e-3, "rtol 0.001")
    assert pic.html == "<svg/>"
    assert pic.caption.endswith(
        "(log scale; 0 drawn at 1e-12). Final weights: not compared (the golden holds export md5s; this "
        "project has no export). Pass (approximate tier): rtol 0.001 over the first 2 steps, <= 0 out, "
        "val@0 rtol 0.0001, |final val diff| <= 0.08 (steps past the judged ones are drawn, not marked). "
        "1 of 4 steps differ."
    )


def test_the_picture_of_a_golden_of_the_run_says_whether_the_digest_is_equal(
    tree: Tree, drawn: dict[str, list], monkeypatch
) -> None:
    make_golden(reg_of(tree), "cpu-own", config_hash=HASH)
    real = exports.golden_for
    for digest, said in ((DIGEST, "equal to"), ("e" * 64, "differs from")):

        def with_run(a: Artifacts, m: dict[str, Any], digest: str = digest) -> GoldenChoice:
            c = real(a, m)
            g = c.golden
            data = {k: v for k, v in g.data.items() if k != "export"}
            run = Golden({**data, "run": {"param_digest": digest}}, g.version, g.tier, g.cross_env)
            return GoldenChoice(run, coverage=c.coverage, rel=c.rel)

        monkeypatch.setattr(exports, "golden_for", with_run)
        pic = fresh_train_picture(tree.artifacts(), T)
        assert f"Final weights: parameter digest {said} the golden's. Pass (exact tier)" in pic.caption
        assert pic.caption.endswith("0 of 4 steps differ.") and pic.html == "<svg/>"


def test_without_a_golden_the_picture_draws_the_run_alone(tree: Tree, drawn: dict[str, list]) -> None:
    pic = fresh_train_picture(tree.artifacts(), T)
    assert pic.caption.startswith(
        "This run's training loss (line) and eval loss (squares), nats per token, alone: no golden for "
        f"environment cpu-own nor for config {HASH} on any other. Pass needs a golden"
    )
    make_golden(reg_of(tree), "cpu-own", config_hash="old")
    pic = fresh_train_picture(tree.artifacts(), T)
    assert pic.caption.startswith(
        "This run's training loss (line) and eval loss (squares), nats per token, alone: golden cpu-own v1 "
        "was blessed for config old. Pass needs"
    )
    assert drawn["overlay"] == []


def test_the_unblessed_picture_draws_the_losses_and_the_finite_evals(drawn: dict[str, list]) -> None:
    m = metrics()
    m["eval"] = [{"step": 0, "loss": 4.5}, {"step": 2, "loss": float("nan")}, {"step": 4, "loss": 2.0}]
    pic = ft._unblessed_picture(m, "no golden here")
    assert drawn["figure"] == [((), {"height": 2.6})]
    (ax,) = drawn["fig"][0].axes
    run, ev = ax.get_lines()
    assert (list(run.get_xdata()), list(run.get_ydata())) == ([0, 1, 2, 3], [4.0, 3.5, 3.0, 2.5])
    assert (run.get_linewidth(), run.get_label()) == (1, "this run")
    assert (list(ev.get_xdata()), list(ev.get_ydata())) == ([0, 4], [4.5, 2.0])
    assert (ev.get_marker(), ev.get_linestyle(), ev.get_markerfacecolor(), ev.get_color(), ev.get_label()) == (
        "s", "None", "none", "#6a1b9a", "eval"
    )  # fmt: skip
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("step", "loss (nats/token)")
    assert ax.get_title() == f"runs/single (config {HASH}): no golden to compare with"
    assert ax.get_legend() is not None
    assert pic.html == "<svg/>"
    assert pic.caption == (
        "This run's training loss (line) and eval loss (squares), nats per token, alone: no golden here. "
        "Pass needs a golden: bless this run if it is right (python -m registry bless --golden --reason "
        "'...'), then the gate compares every step with it."
    )


def test_an_unreadable_registry_has_no_picture(tree: Tree, monkeypatch) -> None:
    monkeypatch.setattr(registry_records, "registry_of", lambda a: Broken(a.root / "registry"))
    with pytest.raises(NoPicture, match=r"^registry/goldens/cpu-own: unreadable$"):
        fresh_train_picture(tree.artifacts(), T)


def test_steps_out_are_the_tiers_own() -> None:
    got, want = [4.0, 3.6, 9.0, 2.5 + 1e-12], [4.0, 3.5, 3.0, 2.5]
    exact = choice(golden_data())
    approx = choice(golden_data(), tier="approx")
    cpu, cuda = ft.ApproxTier.of(CPU), ft.ApproxTier.of(CUDA)
    assert ft._steps_out(exact, cuda, got, want) == [1, 2, 3]
    assert ft._steps_out(approx, cpu, got, want) == [1, 2]
    assert ft._steps_out(approx, cuda, got, want) == [1]


def test_the_approximate_tier_notes_the_export_it_does_not_judge(tree: Tree) -> None:
    md5 = add_export(tree)
    make_golden(reg_of(tree), "cpu-b", config_hash=HASH, files=md5)
    o = fresh_train(tree.artifacts(), POLICY)
    assert (o.status, o.threshold) == (
        "pass",
        "approx vs cpu-b v1: rtol 0.0001, <= 1 steps out, eval rtol 0.001",
    )
    assert o.message.endswith("; export files equal (not judged in this tier)")


def test_the_approximate_tier_notes_the_parameter_digest_it_does_not_judge() -> None:
    for digest, said in ((DIGEST, "equal"), ("e" * 64, "differ")):
        g = golden_data(run={"param_digest": digest})
        o = ft._approx(metrics(), g, None, choice(g, "approx", cross_env=True), CPU)
        assert o.status == "pass"
        assert o.message.endswith(f"; parameter digest {said} (not judged in this tier)")


def test_the_approximate_tier_failing_on_steps_alone_names_no_val_loss() -> None:
    g = golden_data()
    o = ft._approx(metrics(train_loss=[4.0, 3.6, 3.1, 2.5]), g, None, choice(g, "approx", True), CPU)
    assert (o.status, o.measured) == ("fail", "2 steps out")
    assert o.message.endswith(
        "final weights not compared; first step out: 1 (golden 3.5, run 3.6). A real change of the numbers "
        "(lr, init, data order), not machine noise: compare runs/single/loss.csv with the golden's values"
    )


def test_a_refused_run_is_read_no_further_but_drawn_against_its_golden(
    tree: Tree, drawn: dict[str, list]
) -> None:
    """The verdict's reading stops at a refusal (the export and the registry unread, as the gate did
    before it read first); the picture's reading goes on: a refused run is drawn against its golden."""
    md5 = add_export(tree)
    write_run(tree, metrics(config_hash="f" * 16))
    make_golden(reg_of(tree), "cpu-own", config_hash="f" * 16, files=md5)
    a = tree.artifacts()
    r = read_fresh_train(a, {})
    assert r.refused and r.refused[0].startswith("runs/single/metrics.json: config_hash: ffff")
    assert (r.describes_runs, r.files, r.own_project, r.choice) == (False, None, False, None)
    assert list(a.read) == ["runs/single/metrics.json"]
    p = exports.read_fresh_train_picture(tree.artifacts(), {})
    assert p.refused == r.refused and p.files == md5
    assert (p.choice.golden.name, p.choice.rel) == ("cpu-own v1", "registry/goldens/cpu-own/v1.json")
    pic = fresh_train_picture(tree.artifacts(), T)
    assert drawn["overlay"] and pic.caption.endswith("0 of 4 steps differ.")


def test_the_reader_takes_params_for_a_project_of_its_own(tree: Tree) -> None:
    tree.params = Params({"gates": {}}, "params.yaml", ("fresh_train",))
    r = read_fresh_train(tree.artifacts(), {})
    assert (r.refused, r.describes_runs, r.own_project, r.files) == ((), False, True, None)
    assert r.run == metrics() and fresh_train(tree.artifacts(), POLICY).status == "skip"
    write_run(tree, metrics(config_hash="f" * 16))
    refused = read_fresh_train(tree.artifacts(), {})
    assert refused.run["config_hash"] == "f" * 16 and refused.describes_runs is False
