"""Eighth pass, class ckpt: checkpoint contents paired across different states, and a best-so-far file read as a
late save.

- A state one side saves and the other does not (an EMA kept beside the model and saved by the raw loop only) was
  paired with the other side's model because the names end alike, and said to be "an EMA updated otherwise". Saved
  tensors are paired first by the state they belong to (their key path without the parts a wrapper or a checkpoint's
  layout adds: `module.`, `model.`, `state_dict.`); a tensor laid out as tensors already paired so is a state saved
  on one side only, said as such.
- A side that writes two files with the same keys after a step, one current and one kept from an earlier step (a
  best-so-far file written only when a metric improves), was said to "save them 4 steps behind". The file matching
  the other side's save of that step is compared; the other is said as a file kept from an earlier step.
- The saved state that is no tensor (the optimizer's param groups' hyperparameters, a scheduler's counters) is
  recorded and compared where both sides saved it.
"""

from __future__ import annotations

import json

import torch

from ddp_parity.compare.causes import hooked
from ddp_parity.hooks.checkpoints import contents_of

NAMES = ("raw", "lightning")


def _saves(tmp_path, name: str, saves: list[tuple]):
    """A run whose rank 0 saved `saves` [(after_step, path, contents[, settings])], as the hooks write them."""
    trace = tmp_path / name / "trace"
    trace.mkdir(parents=True)
    (trace / "rank0.jsonl").write_text("")
    items = []
    for save in saves:
        step, path, contents = save[:3]
        item = {"op": "torch.save", "after_step": step, "path": path, "contents": contents}
        if len(save) > 3:
            item["settings"] = save[3]
        items.append(item)
    (trace / "rank0.hooks.json").write_text(json.dumps({"checkpoints": {"items": items}}))
    return tmp_path / name


def _model_and_ema(ema_value: float):
    """A model and an EMA of it laid out alike, with the EMA's weights set to `ema_value`."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    ema = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    with torch.no_grad():
        for p in ema.parameters():
            p.fill_(ema_value)
    return model, ema


def test_an_ema_saved_on_one_side_only_is_said_so_never_updated_otherwise(tmp_path):
    """The raw loop saves {state_dict, ema_state_dict, optimizer}; the port's Lightning checkpoint holds the model under
    `state_dict.model.` and no EMA at all. Raw's EMA is not the port's model updated otherwise: it is saved on raw
    only, and the model's tensors, paired by their state, are equal."""
    model, ema = _model_and_ema(0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    raw = contents_of({"state_dict": model, "ema_state_dict": ema, "optimizer": optimizer.state_dict()})
    port = contents_of({"state_dict": {"model": model}, "optimizer_states": [optimizer.state_dict()]})
    # two modules saved whole are both walked (the first's state_dict freed, its id reused by the second's)
    assert {n.split(".")[0] for n in raw} == {"state_dict", "ema_state_dict", "optimizer"}, raw
    found = hooked.checkpoint_contents_apart(
        _saves(tmp_path, "raw", [(4, "/r/checkpoint.pth.tar", raw)]),
        _saves(tmp_path, "port", [(4, "<BytesIO for /p/epoch=0-step=4.ckpt>", port)]),
        equal_through=4,
    )
    assert found is not None and found["apart"] == [[], []], found
    assert found["alone"][0] == sorted(n for n in raw if n.startswith("ema_state_dict.")), found
    assert found["alone"][1] == [], found
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "saved on raw only (a resume of lightning would lose it)" in words, words
    assert "updated otherwise" not in words and "behind" not in words, words
    # where both save it, under their own layouts (raw's `ema.`, the port's attribute `ema`), it is paired and equal
    both = contents_of({"state_dict": {"model": model, "ema": ema}, "optimizer_states": [optimizer.state_dict()]})
    raw_ema = contents_of({"model": model, "ema": ema, "optimizer": optimizer.state_dict()})
    assert (
        hooked.checkpoint_contents_apart(
            _saves(tmp_path, "raw_ema", [(4, "/r/c.pt", raw_ema)]),
            _saves(tmp_path, "both", [(4, "/p/c.ckpt", both)]),
            equal_through=4,
        )
        is None
    )


def test_a_file_kept_from_an_earlier_save_beside_the_current_one_is_no_late_save(tmp_path):
    """The raw loop writes after every epoch a checkpoint of its own and, where a metric improved, a best-so-far file
    with the same keys (model, EMA, optimizer); the best one kept the first epoch's EMA. The current file is compared
    with the port's save of the step (equal), and the best-so-far file is said as a copy kept from an earlier save,
    written at only some saves, never as raw saving 4 steps behind."""
    model, ema_1 = _model_and_ema(0.5)
    _, ema_2 = _model_and_ema(0.25)

    def raw_save(ema):
        return contents_of({"model_state": model, "ema_state": ema})

    def port_save(ema):
        return contents_of({"state_dict": {"model": model, "ema": ema}})

    raw = _saves(
        tmp_path,
        "raw",
        [
            (4, "/r/model_epoch_0001.pyth", raw_save(ema_1)),
            (4, "/r/model.pyth", raw_save(ema_1)),
            (8, "/r/model_epoch_0002.pyth", raw_save(ema_2)),
            (8, "/r/model.pyth", raw_save(ema_1)),  # the model improved, the EMA did not: the first kept
            (12, "/r/model_epoch_0003.pyth", raw_save(ema_2)),
        ],
    )
    port = _saves(
        tmp_path,
        "port",
        [(4, "/p/epoch=0-step=4.ckpt", port_save(ema_1)), (8, "/p/epoch=1-step=8.ckpt", port_save(ema_2))],
    )
    found = hooked.checkpoint_contents_apart(raw, port, equal_through=8)
    assert found["step"] == 8 and found["apart"] == [[], []] and found["alone"] == [[], []], found
    [kept] = found["kept"][0]
    assert kept["path"] == "/r/model.pyth" and kept["held_after"] == 4, kept
    assert kept["written_after"] == [4, 8] and kept["saves"] == [4, 8, 12], kept
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert words.startswith("a note, not a difference in what was saved"), words
    assert "a copy kept from an earlier save" in words and "not a late save" in words, words
    assert "behind" not in words and "/r/model_epoch_0002.pyth" in words, words


def test_the_saved_param_groups_and_schedulers_are_compared_where_both_saved_them(tmp_path):
    """The raw loop sets each epoch's learning rate by hand before the epoch; the port's LambdaLR is stepped at the
    epoch's end, before its checkpoint: the tensors saved are equal, the param groups' lr is not (0.01 against
    0.05). The hyperparameters a resume restores are recorded beside the tensors and said where they differ, with
    both readings (a resume starting otherwise, or a program that sets them again after loading)."""
    from ddp_parity.hooks.checkpoints import settings_of  # new with this class: imported here, so each test fails alone

    model, _ = _model_and_ema(0.5)
    raw_optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    port_optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(port_optimizer, lambda epoch: 0.5)
    raw_state = {"model_state": model, "optimizer_state": raw_optimizer.state_dict()}
    port_state = {
        "state_dict": {"model": model},
        "optimizer_states": [port_optimizer.state_dict()],
        "lr_schedulers": [scheduler.state_dict()],
    }
    raw_settings, port_settings = settings_of(raw_state), settings_of(port_state)
    assert raw_settings["optimizer_state.param_groups.0.lr"] == 0.01, raw_settings
    assert port_settings["lr_schedulers.0.last_epoch"] == 0 and "optimizer_states.0.param_groups.0.params" not in (
        port_settings
    ), port_settings
    raw = _saves(tmp_path, "raw", [(4, "/r/model_epoch_0001.pyth", contents_of(raw_state), raw_settings)])
    port = _saves(tmp_path, "port", [(4, "/p/epoch=0-step=4.ckpt", contents_of(port_state), port_settings)])
    found = hooked.checkpoint_contents_apart(raw, port, equal_through=4)
    assert found["settings_apart"] == [
        ["optimizer_state.param_groups.0.lr", 0.01, "optimizer_states.0.param_groups.0.lr", 0.05]
    ], found
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "raw's optimizer_state.param_groups.0.lr 0.01 against lightning's" in words, words
    assert "unless the program sets them again after loading" in words, words
    assert "momentum" not in words, words  # equal on both sides: never said
    same = _saves(tmp_path, "same", [(4, "/r/b.pyth", contents_of(raw_state), {**raw_settings})])
    assert hooked.checkpoint_contents_apart(raw, same, equal_through=4) is None


def test_saved_values_apart_never_contradict_copies_recorded_equal(tmp_path):
    """Both sides save an EMA beside the model, the saved EMAs differ, and the copy digests the step records (taken
    before each step's update, so step 5's holds the update after step 4) are equal: the words never say the EMA was
    updated otherwise; they say the values saved are not the recorded copies'."""
    model, ema = _model_and_ema(0.5)
    _, other = _model_and_ema(0.25)
    raw = _saves(tmp_path, "raw", [(4, "/r/c.pt", contents_of({"model": model, "ema": ema}))])
    port = _saves(tmp_path, "port", [(4, "/p/c.ckpt", contents_of({"state_dict": {"model": model, "ema": other}}))])
    found = hooked.checkpoint_contents_apart(raw, port, equal_through=4)
    assert found["apart"][0] and not found["copies_equal"], found  # no copy recorded: the state is said to differ
    assert "updated otherwise" in hooked.checkpoint_contents_words(found, NAMES)
    for run in (raw, port):
        records = [{"step": s, "loss": 1.0, "copy_digest": [1.5, 0.25]} for s in (4, 5)]
        (run / "trace" / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    found = hooked.checkpoint_contents_apart(raw, port, equal_through=4)
    assert found["copies_equal"], found
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "updated otherwise" not in words and "are equal on both sides as updated after step 4" in words, words
