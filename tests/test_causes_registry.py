"""The causes are a registry (ddp_parity.compare.causes): every kind the diagnosis can report is one
`Cause` with its check, its words, the evidence it needs before its fix and its docs line, placed
in the causal order or listed as reported by other checks; docs/diagnosis.md's table of kinds is
the registry's. Read from the source and the registry: nothing is trained."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from ddp_parity.compare import causes
from ddp_parity.compare.causes import CAUSES, CHECKS, EVERY_CAUSE, REPORTED, kinds_table
from ddp_parity.compare.causes.base import Cause, Evidence

REPO = Path(__file__).resolve().parents[1]
CAUSES_DIR = REPO / "ddp_parity" / "compare" / "causes"
PHASES = (
    "setup",
    "resume",
    "seeds",
    "per_step",
    "data",
    "forward",
    "backward",
    "update",
    "schedule_steps",
    "end",
    "undetermined",
    "parting",
    "noise",
    "measured",
)

# the kinds report.json may carry: a public contract (renaming one breaks users' filters)
KINDS = {
    *("crash", "stall", "metadata", "config", "config.threads", "config.arithmetic", "config.state"),
    *("config.torch_flags", "config.sharding", "config.seed", "sampler_seed", "param_groups"),
    *("param_groups.class", "init", "resume", "recording", "step_count", "step_count.empty", "set_epoch"),
    *("step_count.validation", "step_count.state_names", "step_count.stop"),
    *(
        "data_order",
        "data_order.shared",
        "data_order.fed_alike",
        "data_order.unrecorded",
        "data_pipeline",
        "optimizer.stale_params",
    ),
    *("data_order.ahead", "data_order.accumulation", "gradients.across_validation", "data_order.evaluation"),
    *("reduction_order.sharding",),
    *(
        "gradients.accumulation_sync",
        "module_state",
        "module_state.evaluation_mode",
        "module_state.training_mode",
        "optimizer.lr_restart",
        "rng",
        "numerics.module",
        "numerics",
        "loss",
    ),
    *("reduction_order", "gradients.factor", "gradients", "optimizer.lr", "optimizer", "buffers.replicas"),
    *("buffers.sync", "numerics.validation", "equivalent", "undetermined", "undetermined.unrecorded"),
    *("loss.factor", "frozen", "gradients.norm", "optimizer.lr_ahead", "optimizer.effective_lr"),  # issue 37
    *("noise", "loss.beyond_noise", "gradients.beyond_noise", "optimizer.beyond_noise"),
    *("recording.measured", "init.parameter", "data_order.not_shuffled"),
    *(
        "data_order.epoch",
        "data_order.skipped",
        "optimizer.clip",
        "tied",
        "optimizer.hyperparameters",
        "data_order.indices_unrecorded",
    ),  # issue 46
    *("optimizer.lr_shift", "rng.reseed"),  # issue 46: an lr set by hand, shifted (no scheduler step recorded)
    *(
        "rng.loader_draws",
        "data_order.batch_size",
        "rng.seed",
        "final_params.moved",
    ),  # issue 46: from the first pass on new programs
    *(
        "optimizer.scheduler_steps",
        "gradients.sync_pattern",
    ),  # issue 46: the scheduler steps and DDP syncs each step recorded
    "rng.drawn_before_step_1",  # issue 46: the fifth first pass (KAIR's EMA network built again)
    "rng.other_generator",  # issue 46: the sixth first pass (DeiT's numpy seeded per rank, Mixup drawing from it)
    "optimizer.other_steps",  # issue 46: a GAN's second optimizer (StyleGAN2's generator) stepped at other points
    "data_order.restarted",  # issue 46: the eighth first pass (FixMatch's iterators kept across Lightning's epochs)
    "data_order.remade",  # issue 46: the ninth first pass (VAR's infinite batch sampler, iterated anew each epoch)
    "loss.gathered",  # issue 46: the tenth first pass (open_clip's contrastive loss over another gathered batch)
    *("buffers.averaged", "buffers.statistics"),  # issue 46: the tenth first pass (timm's distribute_bn)
    "optimizer.lr_group",  # issue 46: the eleventh first pass (hrnet's non-backbone group at lr × 10)
    "optimizer.lr_at_parting",  # issue 46: the eleventh first pass (ppo's KL early stop at another depth)
}


def reported_causes() -> dict[str, set[str]]:
    """{module: the names every `finding(ctx, NAME, ...)` call in it passes}: what its checks can report."""
    out = {}
    for path in sorted(CAUSES_DIR.glob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "finding" and len(node.args) > 1:
                cause = node.args[1]
                names.add(ast.unparse(cause))
        out[path.stem] = names
    return out


def test_every_kind_the_diagnosis_reports_is_one_complete_definition():
    assert {cause.kind for cause in EVERY_CAUSE} == KINDS
    for cause in EVERY_CAUSE:
        assert isinstance(cause, Cause), cause
        assert callable(cause.check), cause.kind
        assert isinstance(cause.why, str) and cause.fix.strip(), cause.kind  # `equivalent` alone has no why
        assert isinstance(cause.requires, Evidence) and cause.requires.says.strip(), cause.kind
        assert callable(cause.requires.holds), cause.kind
        assert cause.doc.strip() and "\n" not in cause.doc and "|" not in cause.doc, cause.kind
        assert cause.check.__module__.rsplit(".", 1)[-1] in PHASES, (cause.kind, cause.check.__module__)


def test_every_cause_a_check_reports_is_in_the_registry():
    """A check names the Cause it reports (`finding(ctx, CAUSE, ...)`): each such name is a registered
    cause, and every Cause defined anywhere in the package is registered."""
    registered = {id(cause) for cause in EVERY_CAUSE}
    for module_name, names in reported_causes().items():
        module = importlib.import_module(f"ddp_parity.compare.causes.{module_name}")
        for name in names:
            if name == "cause":  # undetermined: one of its own two causes, chosen by what was recorded
                continue
            value = vars(module)[name.split("[")[0]]  # a Cause, or a table of them (CONFIG_KINDS[kind])
            for cause in value.values() if isinstance(value, dict) else [value]:
                assert id(cause) in registered, (module_name, name)
        for name, value in vars(module).items():
            if isinstance(value, Cause):
                assert id(value) in registered, f"{module_name}.{name} is defined but not in causes.CAUSES or REPORTED"


def test_the_causal_order_runs_each_check_once_and_ends_with_equivalent():
    assert len(set(CHECKS)) == len(CHECKS)
    assert CHECKS[-1].__name__ == "check_equivalent" and CAUSES[-1].kind == "equivalent"
    assert not {cause.check for cause in REPORTED} & set(CHECKS)
    # a check's kinds stand together in the order: where it runs, all it can tell apart is decided
    positions = [CHECKS.index(cause.check) for cause in CAUSES]
    assert positions == sorted(positions)


def test_causes_that_share_a_kind_share_its_category_and_evidence():
    by_kind: dict[str, list[Cause]] = {}
    for cause in EVERY_CAUSE:
        by_kind.setdefault(cause.kind, []).append(cause)
    for kind, shared in by_kind.items():
        assert len({c.requires for c in shared}) == 1, kind
    assert len(by_kind["recording"]) == 4  # one per way of recording: step numbers, clipped norm, lr, float32


def test_docs_diagnosis_md_shows_the_registrys_table_of_kinds():
    text = (REPO / "docs" / "diagnosis.md").read_text()
    assert kinds_table() in text, (
        "docs/diagnosis.md's table of kinds is stale: python -m ddp_parity.compare.causes --write docs/diagnosis.md"
    )
    for cause in EVERY_CAUSE:
        assert f"| `{cause.kind}` |" in kinds_table()


def test_the_categories_are_the_registrys():
    assert set(causes.CATEGORIES) == {cause.category for cause in EVERY_CAUSE}
    assert set(causes.UPSTREAM_CATEGORIES) <= set(causes.CATEGORIES)
