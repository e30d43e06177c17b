"""Data, where torch decides it: the sampler indices of every batch a DataLoader yields, the batch
itself (digested at the step it trained), every sampler as built (the one Lightning injects too; one of the
program's own as a DataLoader is built with it) and every set_epoch, of any sampler class a DataLoader was given.

A step's epoch is the last set_epoch value; in a loop that never calls set_epoch, the pass over the
training DataLoader its batch came from (a new iterator over the same dataset, trained from, is the
next pass), so that an epoch that replays the first one's order is still seen as another epoch.

A batch belongs to the backward that follows it: each backward takes the oldest batch not yet
taken from the iterator that yielded last. A loader that fetches ahead (Lightning's prefetch of one
batch) is then still paired right, and an evaluation loader's batches are never taken by a step.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import weakref

import torch
from torch.utils.data import dataloader as torch_dataloader
from torch.utils.data import distributed as torch_distributed
from torch.utils.data import sampler as torch_sampler

from ddp_parity.fingerprints import sampler_facts
from ddp_parity.hooks import rng
from ddp_parity.hooks.state import bounded_fifo, guarded, recording

PENDING = "_ddp_parity_pending"  # on a DataLoader iterator: the index lists dispatched, not yet yielded
YIELDED = "_ddp_parity_yielded"  # on a DataLoader iterator: (indices, batch) yielded, not yet consumed
PASS = "_ddp_parity_pass"  # on a DataLoader iterator: its `loader_iterators` entry, the running digest of its indices
BUILT = "_ddp_parity_built"  # on a sampler: the `order` of its `samplers` entry, which names it in later facts


def install() -> None:
    base = torch_dataloader._BaseDataLoaderIter
    original_next_index, original_next = base._next_index, base.__next__

    @functools.wraps(original_next_index)
    def _next_index(self):
        index = original_next_index(self)
        _dispatched(self, index)
        return index

    @functools.wraps(original_next)
    def __next__(self):
        batch = original_next(self)
        _yielded(self, batch)
        return batch

    base._next_index, base.__next__ = _next_index, __next__
    base.__init__ = _iterated(base.__init__)
    for cls in (torch_distributed.DistributedSampler, torch_sampler.RandomSampler, torch_sampler.SequentialSampler):
        cls.__init__ = _built(cls.__init__)
    _watch_set_epoch(torch_distributed.DistributedSampler)
    torch_dataloader.DataLoader.__init__ = _loader_built(torch_dataloader.DataLoader.__init__)


@guarded("DataLoader indices")
def _dispatched(iterator, index) -> None:
    if recording() is None:
        return
    pending = iterator.__dict__.get(PENDING)
    if pending is None:
        pending = iterator.__dict__[PENDING] = bounded_fifo()
    pending.append(index)


@guarded("DataLoader batches")
def _yielded(iterator, batch) -> None:
    live = recording()
    if live is None:
        return
    pending = iterator.__dict__.get(PENDING)
    index = pending.popleft() if pending else None
    if iterator._dataset_kind != torch_dataloader._DatasetKind.Map:
        index = None  # an IterableDataset's sampler yields placeholders, not indices
    elif index is not None and not isinstance(index, (list, tuple)):
        index = [index]  # batch_size=None: one sample per yield
    yielded = iterator.__dict__.get(YIELDED)
    if yielded is None:
        yielded = iterator.__dict__[YIELDED] = bounded_fifo()
    yielded.append((index, batch))
    live.last_iterator = weakref.ref(iterator)
    _note_indices(iterator, index, live.steps + 1)


def _note_indices(iterator, index, step: int | None = None) -> None:
    """The iterator's `loader_iterators` entry: how many batches it yielded, before which step the last came, and the
    sha256 of their indices so far, so that an evaluation's samples are compared whatever its loader (no step trains
    from it), and a loader whose batches span steps without a backward paired with them (a second training loader
    beside the one the step's backward takes) is told from an evaluation's (all its batches between two steps)."""
    entry = iterator.__dict__.get(PASS)
    if entry is None:
        return
    fact, digest, sampler = entry
    if fact["batches"] == 0 and sampler is not None:  # the order was drawn at the first batch, from this epoch
        fact["sampler"]["epoch"] = _plain_epoch(sampler)
    fact["batches"] += 1
    if step is not None:
        fact["last_batch_before_step"] = step
    if index is None or fact.get("indices_sha256", "") is None:
        fact["indices_sha256"] = None  # a batch without indices (an IterableDataset): nothing to compare
        return
    try:
        digest.update(repr([int(i) for i in index]).encode())
    except (TypeError, ValueError):  # a batch sampler of the program's own yielding more than indices
        fact["indices_sha256"] = None
        return
    fact["indices_sha256"] = digest.hexdigest()


def consume_batch(live) -> None:
    """A backward ran: it trained on the oldest batch not yet taken from the iterator that yielded last."""
    iterator = live.last_iterator() if live.last_iterator is not None else None
    yielded = iterator.__dict__.get(YIELDED) if iterator is not None else None
    if not yielded:
        live.indices = None  # a backward without a batch from a DataLoader (a program's own draw)
        return
    index, batch = yielded.popleft()
    if (entry := iterator.__dict__.get(PASS)) is not None:
        entry[0]["trained"] = True
    live.batches.append(batch)
    note_pass(live, iterator)
    if index is None or live.indices is None:
        live.indices = None
    else:
        live.indices.append(index)


def pending_batch_of(live) -> int | None:
    """The `order` of the `loader_iterators` entry of the DataLoader iterator that yielded last, where it still holds
    a batch no backward has taken: forwards run now ran after a step's batch was fetched and before its backward
    (a feature-caching pass computing every micro-batch's features without gradients, then re-running each with
    them), and belong to that step where a step trains from the iterator (its entry's `trained`). None otherwise:
    an evaluation's own loader yielded last, or every batch fetched was trained from already."""
    iterator = live.last_iterator() if live.last_iterator is not None else None
    if iterator is None or not iterator.__dict__.get(YIELDED):
        return None
    entry = iterator.__dict__.get(PASS)
    return entry[0].get("order") if entry is not None else None


def note_pass(live, iterator) -> None:
    """A step trained on a batch of `iterator`: a new iterator over the same dataset is the loader's next
    pass (an epoch, for a loop that never calls set_epoch). An iterator no step trains from (a batch
    peeked at with next(iter(loader)), an evaluation's) starts no pass."""
    key = id(iterator._dataset)
    seen = live.passes.get(key)
    if seen is None:
        live.passes[key] = [weakref.ref(iterator), 0]
    elif seen[0]() is not iterator:
        live.passes[key] = [weakref.ref(iterator), seen[1] + 1]
    live.loader_pass = live.passes[key][1]


def train_sampler(live):
    """The sampler of the loader the steps train on: the iterator that yielded last."""
    iterator = live.last_iterator() if live.last_iterator is not None else None
    if iterator is None:
        return None
    index_sampler = iterator._index_sampler
    return getattr(index_sampler, "sampler", index_sampler)


def _iterated(original):
    @functools.wraps(original)
    def __init__(self, loader, *args, **kwargs):
        before = _global_state_before_its_draw(loader)
        original(self, loader, *args, **kwargs)
        _note_iterator(self, loader, before)

    return __init__


@guarded("the generator before a DataLoader's draw")
def _global_state_before_its_draw(loader) -> str | None:
    """The digest of torch's global generator before an iterator draws from it: a later restore of that state
    (Lightning's isolate_rng around its sanity check) undoes this draw and every one after it."""
    if recording() is None or getattr(loader, "generator", None) is not None:
        return None
    return rng.torch_state()


@guarded("DataLoader iterators")
def _note_iterator(iterator, loader, rng_before: str | None = None) -> None:
    """A DataLoader was iterated: its iterator drew one number for its workers' base seed, from the global
    generator where the loader has no generator= of its own (and a RandomSampler without one draws another).
    Its sampler as it is now (a DistributedSampler's epoch: the last set_epoch on it) is noted beside, and the
    indices it yields are digested as it yields them (`_note_indices`). The epoch is read again at the first batch,
    where the sampler drew its order: a set_epoch between iter(loader) and the first batch is the one it used."""
    live = recording()
    if live is None:
        return
    sampler = _ordering_sampler(loader)
    fact = live.note(
        "loader_iterators",
        {
            "dataset": type(loader.dataset).__name__,
            "global_draw": loader.generator is None,
            "num_workers": loader.num_workers,  # 0: __getitem__ and collate run in the main process
            # how its workers are seeded besides the base seed: what a pipeline's draws depend on
            "worker_init_fn": _callable_name(loader.worker_init_fn),
            "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
            "sampler": {
                **sampler_facts(sampler),
                "epoch": _plain_epoch(sampler),
                **({"batch_sampler": True} if sampler is loader.batch_sampler else {}),
                **_has_set_epoch(sampler),
            },
            **_built_order(sampler),
            "length": _loader_length(loader),
            "batches": 0,
            "indices_sha256": "",
            "trained": False,
            **({"rng_before": rng_before} if rng_before is not None else {}),
        },
    )
    if fact is not None:
        # the order is drawn where the sampler's __iter__ runs: at the first batch where it is a generator function
        # or under torch's BatchSampler (whose own __iter__ is one), here where the loader's index sampler returns
        # an iterator from a plain __iter__ (a bucket sampler computing its batches, then iter(batches))
        drawn_here = sampler is iterator._index_sampler and not inspect.isgeneratorfunction(type(sampler).__iter__)
        iterator.__dict__[PASS] = (fact, hashlib.sha256(), None if drawn_here else sampler)


def _callable_name(fn) -> str | None:
    """`module.qualname` of a worker_init_fn (a functools.partial's function: Lightning's pl_worker_init_function
    comes bound to the rank), None where there is none."""
    if fn is None:
        return None
    fn = getattr(fn, "func", fn)
    return f"{getattr(fn, '__module__', None) or ''}.{getattr(fn, '__qualname__', None) or type(fn).__name__}".lstrip(
        "."
    )


def _ordering_sampler(loader):
    """The sampler that orders a DataLoader's samples: a batch sampler of the program's own (vits' bucket sampler,
    a DistributedSampler subclass given as batch_sampler=) orders them itself, the loader's `sampler` then being
    the SequentialSampler the DataLoader made; torch's BatchSampler takes them from the sampler it wraps."""
    batch_sampler = loader.batch_sampler
    if batch_sampler is not None and not isinstance(batch_sampler, torch_sampler.BatchSampler):
        return batch_sampler
    return getattr(batch_sampler, "sampler", None) or loader.sampler


def _loader_length(loader) -> int | None:
    """len(loader), the batches one pass holds: an iterator dropped with fewer `batches` than this was dropped with
    batches left (a loop's epoch shorter than its loader). None where the loader has no length (an IterableDataset
    without one) or computing it fails: a batch sampler of the program's own may not say."""
    try:
        return int(len(loader))
    except Exception:
        return None


def _built_order(sampler) -> dict:
    """{"sampler_built": the `order` of the sampler's `samplers` entry}, where it was built while recording: which
    sampler an iterator draws from and a set_epoch call acts on (several samplers share a class)."""
    built = getattr(sampler, "__dict__", {}).get(BUILT)
    return {"sampler_built": built} if isinstance(built, int) else {}


def _has_set_epoch(sampler) -> dict:
    """{"has_set_epoch": bool}: whether the sampler ordering a pass has a set_epoch at all. A sampler of the
    program's own without one (an infinite batch sampler keeping its order in itself) cannot be told its epoch, so
    no report may advise calling it; None (no sampler) records nothing."""
    if sampler is None:
        return {}
    return {"has_set_epoch": callable(getattr(sampler, "set_epoch", None))}


def _plain_epoch(sampler):
    epoch = getattr(sampler, "epoch", None)
    return epoch if isinstance(epoch, int) else None


def _built(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _note_sampler(self)

    return __init__


@guarded("samplers as built")
def _note_sampler(sampler) -> None:
    live = recording()
    if live is None:
        return
    facts = sampler_facts(sampler)
    for key in ("replacement", "generator"):
        if hasattr(sampler, key):
            value = getattr(sampler, key)
            facts[key] = value if value is None or isinstance(value, bool) else _generator_seed(value)
    live.note("samplers", facts)
    sampler.__dict__[BUILT] = live.noted  # set_epoch calls and iterators then name the sampler they act on


def _generator_seed(generator):
    return generator.initial_seed() if isinstance(generator, torch.Generator) else repr(generator)


def _loader_built(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _note_loader_samplers(self)

    return __init__


@guarded("the samplers a DataLoader is built with")
def _note_loader_samplers(loader) -> None:
    """A sampler of the program's own (a Sampler subclass with its own generator and set_epoch, BasicSR's
    EnlargedSampler; a bucket batch sampler) is built before any hook sees it: it is noted as the DataLoader is
    built with it, and its class's set_epoch watched from then on. torch's BatchSampler only wraps the sampler it
    is given; torch's own samplers were noted as built."""
    batch_sampler = loader.batch_sampler
    for sampler in (loader.sampler, batch_sampler, getattr(batch_sampler, "sampler", None)):
        if sampler is None or isinstance(sampler, torch_sampler.BatchSampler):
            continue
        _watch_set_epoch(type(sampler))
        if recording() is not None and BUILT not in getattr(sampler, "__dict__", {BUILT: None}):
            _note_sampler(sampler)


WATCHED = "_ddp_parity_set_epoch"  # on a set_epoch function: it notes its calls already


def _watch_set_epoch(cls) -> None:
    """Note every set_epoch call of `cls`: the set_epoch each class of its MRO defines (an inherited one is where it
    is defined) wrapped once; a class that has none has nothing to watch."""
    for klass in cls.__mro__:
        original = klass.__dict__.get("set_epoch")
        if inspect.isfunction(original) and not getattr(original, WATCHED, False):
            klass.set_epoch = _set_epoch(original)


_SETTING: set[int] = set()  # ids of the samplers inside a watched set_epoch: a subclass's calling its base's


def _set_epoch(original):
    @functools.wraps(original)
    def set_epoch(self, *args, **kwargs):
        # the call goes through as the program made it: a set_epoch of the program's own may name its argument
        # otherwise (`ep=`); a subclass's set_epoch that calls its base's (both watched) is one call, the outermost
        # notes it
        outer = id(self) not in _SETTING
        _SETTING.add(id(self))
        try:
            result = original(self, *args, **kwargs)
        finally:
            if outer:
                _SETTING.discard(id(self))
        if outer:
            _note_epoch(self, args[0] if args else next(iter(kwargs.values()), None))
        return result

    setattr(set_epoch, WATCHED, True)
    return set_epoch


@guarded("set_epoch")
def _note_epoch(sampler, epoch) -> None:
    live = recording()
    if live is None:
        return
    epoch = int(epoch)  # a program's own set_epoch may take anything: one that is no number raises here, guarded
    live.epoch, live.epoch_given = epoch, True
    live.note("set_epoch", {"sampler": type(sampler).__name__, "epoch": epoch, **_built_order(sampler)})
