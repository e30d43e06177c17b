"""One story: the category, the module finding, the fix and the missing evidence of a diagnosis agree
(ddp_parity.compare.story). Each rule is shown to fail on a diagnosis that breaks it, and the suite
itself runs under DDP_PARITY_CHECK_STORY (tests/conftest.py), so every report any test builds, in
any process, is checked."""

from __future__ import annotations

import copy
import os

from test_diagnosis import make_records, pair, run_diagnosis, trained_apart

from ddp_parity.compare.findings import Finding
from ddp_parity.compare.story import STORY_CHECK_ENV, story_problems


def _loss_pair(tmp_path):
    records = make_records()
    records[1][1]["loss"] += 1e-3
    return pair(tmp_path, records_b=trained_apart(records, 2))


def test_the_suite_checks_every_diagnosis_it_builds():
    assert os.environ.get(STORY_CHECK_ENV), "tests/conftest.py sets it for this process and every child"


def test_an_unexplained_loss_difference_is_consistent_and_says_what_is_missing(tmp_path):
    a, b = _loss_pair(tmp_path)
    report, d = run_diagnosis(a, b)
    assert story_problems(Finding.from_json(d), a, b, report["first_divergence"]) == []
    assert d["category"] == "undetermined" and len(d["candidates"]) >= 2


def test_a_fix_to_record_more_without_what_is_missing_is_a_problem(tmp_path):
    """`undetermined.unrecorded` tells the user what to record: without the evidence a side lacks, that
    fix has nothing behind it."""
    a, b = _loss_pair(tmp_path)
    report, d = run_diagnosis(a, b)
    assert d["kind"] == "undetermined.unrecorded" and d["unchecked"]
    problems = story_problems(Finding.from_json({**d, "unchecked": []}), a, b, report["first_divergence"])
    assert any(p.startswith("undetermined.unrecorded gives its fix without its evidence") for p in problems), problems


def test_a_category_the_module_finding_contradicts_is_a_problem(tmp_path):
    a, b = _loss_pair(tmp_path)
    report, d = run_diagnosis(a, b)
    broken = copy.deepcopy(d)
    # the report: the watch saw the first module's input differ, the category said numerics
    broken.update(category="numerics", kind="numerics.module")
    broken["module"] = {"name": "embed", "step": d["step"], "reading_kind": "batch"}
    problems = story_problems(Finding.from_json(broken), a, b, report["first_divergence"])
    assert any("contradicts the module finding" in p for p in problems), problems


def test_a_fix_without_its_evidence_is_a_problem(tmp_path):
    a, b = _loss_pair(tmp_path)
    report, d = run_diagnosis(a, b)
    for kind, category in (("gradients", "gradients"), ("rng", "rng"), ("numerics", "numerics")):
        broken = {**copy.deepcopy(d), "category": category, "kind": kind, "candidates": []}
        problems = story_problems(Finding.from_json(broken), a, b, report["first_divergence"])
        assert any(f"{kind} gives its fix without its evidence" in p for p in problems), (kind, problems)


def test_missing_evidence_left_unsaid_is_a_problem(tmp_path):
    a, b = _loss_pair(tmp_path)
    report, d = run_diagnosis(a, b)
    broken = {**copy.deepcopy(d), "unchecked": [u for u in d["unchecked"] if u["evidence"] != "batch"]}
    problems = story_problems(Finding.from_json(broken), a, b, report["first_divergence"])
    assert problems == ["missing evidence left unsaid: batch (not recorded by side ['a', 'b'])"], problems


def test_a_module_difference_under_an_equivalent_verdict_is_a_problem(tmp_path):
    a, b = pair(tmp_path)
    report, d = run_diagnosis(a, b)
    broken = {**copy.deepcopy(d), "module": {"name": "head", "step": 1, "reading_kind": "numerics"}}
    assert story_problems(Finding.from_json(d), a, b, report["first_divergence"]) == []
    assert any("says the training is the same" in p for p in story_problems(Finding.from_json(broken), a, b, None))
