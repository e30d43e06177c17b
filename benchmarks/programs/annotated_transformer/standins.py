"""Stand-ins for what the_annotated_transformer.py imports and this environment lacks (the port's own code, not the
authors'): torchtext's Multi30k, to_map_style_dataset and build_vocab_from_iterator, spacy's tokenizers and GPUtil.
The data set is a synthetic German-English parallel corpus of variable-length sentences drawn from a fixed seed by its
own generator (Python's random.Random(0)): nothing here draws from a global generator."""

from __future__ import annotations

import random
from collections import Counter

_DE = (
    "ein eine der die das mann frau kind hund katze ball haus strasse wasser spielt lauft sitzt steht rot blau".split()
)
_EN = "a an the the the man woman child dog cat ball house street water plays runs sits stands red blue".split()
_SIZES = {"train": 48, "valid": 16, "test": 8}


def _corpus(split: str) -> list[tuple[str, str]]:
    rng = random.Random({"train": 0, "valid": 1, "test": 2}[split])
    pairs = []
    for _ in range(_SIZES[split]):
        words = [rng.randrange(len(_DE)) for _ in range(rng.randint(3, 10))]
        de = " ".join(_DE[w] for w in words)
        en = " ".join(_EN[w] for w in reversed(words))  # another word order: something to learn
        pairs.append((de, en))
    return pairs


def Multi30k(language_pair=("de", "en")):  # noqa: N802 (torchtext's name)
    """torchtext.datasets.Multi30k: the train, valid and test splits as lists of (de, en) sentence pairs."""
    assert tuple(language_pair) == ("de", "en")
    return _corpus("train"), _corpus("valid"), _corpus("test")


def to_map_style_dataset(iter_data):
    """torchtext.data.functional.to_map_style_dataset: the items in a list (len() and indexing)."""
    return list(iter_data)


class Vocab:
    """torchtext.vocab.Vocab: token -> index, the default index for unknown tokens, calling it on a token list."""

    def __init__(self, itos: list[str]):
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.default_index = None

    def set_default_index(self, index: int) -> None:
        self.default_index = index

    def __getitem__(self, token: str) -> int:
        if token in self.stoi:
            return self.stoi[token]
        if self.default_index is None:
            raise RuntimeError(f"Token {token} not found and default index is not set")
        return self.default_index

    def __call__(self, tokens: list[str]) -> list[int]:
        return [self[t] for t in tokens]

    def __len__(self) -> int:
        return len(self.itos)

    def get_stoi(self) -> dict[str, int]:
        return dict(self.stoi)

    def get_itos(self) -> list[str]:
        return list(self.itos)


def build_vocab_from_iterator(iterator, min_freq=1, specials=None, special_first=True):
    """torchtext.vocab.build_vocab_from_iterator: the specials first, then the tokens seen at least min_freq times,
    by descending frequency, ties by the token (torchtext's order)."""
    counter = Counter()
    for tokens in iterator:
        counter.update(tokens)
    specials = list(specials or [])
    ordered = sorted(counter.items(), key=lambda x: (-x[1], x[0]))
    words = [t for t, c in ordered if c >= min_freq and t not in specials]
    return Vocab(specials + words if special_first else words + specials)


class _Token:
    def __init__(self, text: str):
        self.text = text


class _Tokenizer:
    def __call__(self, text: str) -> list[_Token]:
        return [_Token(t) for t in text.split()]


class _Language:
    def __init__(self, name: str):
        self.name = name
        self.tokenizer = _Tokenizer()


def load(name: str) -> _Language:
    """spacy.load: a language whose tokenizer splits on whitespace (the synthetic corpus has no punctuation)."""
    return _Language(name)


def showUtilization() -> None:  # noqa: N802 (GPUtil's name)
    """GPUtil.showUtilization: no GPU here."""
    print("GPUtil: no GPU (CPU run)")
