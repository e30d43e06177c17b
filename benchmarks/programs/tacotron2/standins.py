"""Stand-ins for what NVIDIA/tacotron2 imports and this machine lacks (not part of the authors' code).

- `HParams`: tf.contrib.training.HParams (attributes from keyword arguments, `parse("a=1,b=x")` typed by the
  default's type, lists as `[a,b]` or `a;b`, `values()`).
- `mel`: librosa.filters.mel (Slaney mel scale, Slaney area normalisation, librosa 0.6's positional signature
  `mel(sr, n_fft, n_mels, fmin, fmax)`).
- `get_window`: scipy.signal.get_window for 'hann' (periodic with fftbins=True).
- `pad_center`, `tiny`, `normalize`: librosa.util's.
- `read`: scipy.io.wavfile.read for 16-bit PCM mono (stdlib wave).
- `SummaryWriter`: torch.utils.tensorboard's (tensorboard is not installed): every add_* is a no-op.
- `unidecode`, `inflect`: the text cleaners' imports (the tiny config uses basic_cleaners, which needs neither).
- `write_data`: the data set: short waveforms drawn from a fixed seed, written as 16-bit wavs, and the authors'
  `path|text` file lists (a few short sentences), under the side's cwd (the corpus's `prepare` step).
"""

from __future__ import annotations

import os
import wave

import numpy as np


class HParams:
    def __init__(self, **kwargs):
        self._names = list(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, v)

    def parse(self, values: str):
        if not values:
            return self
        parts, depth, cur = [], 0, ""
        for ch in values:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for part in parts:
            name, _, raw = part.partition("=")
            name, raw = name.strip(), raw.strip()
            if name not in self._names:
                raise ValueError(f"Unknown hyperparameter {name!r}")
            default = getattr(self, name)
            if isinstance(default, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(f"{name}: not a bool: {raw!r}")
                value = raw.lower() in ("true", "1")
            elif isinstance(default, int):
                value = int(raw)
            elif isinstance(default, float):
                value = float(raw)
            elif isinstance(default, list):
                items = raw.strip("[]").replace(";", ",").split(",")
                value = [i.strip() for i in items if i.strip()]
            else:
                value = raw
            setattr(self, name, value)
        return self

    def values(self):
        return {k: getattr(self, k) for k in self._names}


class _Logging:
    @staticmethod
    def info(msg, *args):
        print(msg % args if args else msg)


class _Training:
    HParams = HParams


class _Contrib:
    training = _Training


class tf:  # noqa: N801 - the module name hparams.py uses
    contrib = _Contrib
    logging = _Logging


def _hz_to_mel(f):
    f = np.asanyarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, mels)


def _mel_to_hz(m):
    m = np.asanyarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def mel(sr, n_fft, n_mels=128, fmin=0.0, fmax=None):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) with htk=False, norm='slaney' (float32)."""
    if fmax is None:
        fmax = float(sr) / 2
    weights = np.zeros((n_mels, int(1 + n_fft // 2)), dtype=np.float32)
    fftfreqs = np.linspace(0, float(sr) / 2, int(1 + n_fft // 2), endpoint=True)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def get_window(window, nx, fftbins=True):
    """scipy.signal.get_window('hann', nx, fftbins): the periodic Hann window when fftbins."""
    if window != "hann":
        raise ValueError(f"stand-in get_window: only 'hann', not {window!r}")
    m = nx + 1 if fftbins else nx
    w = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(m) / (m - 1))
    return w[:nx] if fftbins else w


def pad_center(data, size, axis=-1, **kwargs):
    kwargs.setdefault("mode", "constant")
    n = data.shape[axis]
    lpad = int((size - n) // 2)
    lengths = [(0, 0)] * data.ndim
    lengths[axis] = (lpad, int(size - n - lpad))
    if lpad < 0:
        raise ValueError(f"Target size ({size:d}) must be at least input size ({n:d})")
    return np.pad(data, lengths, **kwargs)


def tiny(x):
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float32
    return np.finfo(dtype).tiny


def normalize(S, norm=np.inf, axis=0, **kwargs):
    if norm is None:
        return S
    mag = np.abs(S).astype(float)
    if norm == np.inf:
        length = np.max(mag, axis=axis, keepdims=True)
    else:
        length = np.sum(mag**norm, axis=axis, keepdims=True) ** (1.0 / norm)
    length[length < tiny(S)] = 1.0
    return S / length


def read(path):
    """scipy.io.wavfile.read for 16-bit PCM mono: (rate, int16 array)."""
    with wave.open(str(path), "rb") as w:
        rate = w.getframerate()
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()
    return rate, data


class SummaryWriter:
    def __init__(self, logdir=None, *args, **kwargs):
        self.logdir = logdir

    def add_scalar(self, *args, **kwargs):
        pass

    def add_histogram(self, *args, **kwargs):
        pass

    def add_image(self, *args, **kwargs):
        pass

    def close(self):
        pass


def unidecode(text):
    return text


class inflect:  # noqa: N801 - the module name numbers.py uses
    class engine:  # noqa: N801
        def number_to_words(self, *args, **kwargs):
            raise NotImplementedError("stand-in inflect: use basic_cleaners")


SENTENCES = [
    "Printing, in the only sense with which we are at present concerned.",
    "The earliest book printed with movable types.",
    "Now, as all books not primarily intended as picture books.",
    "And it is worth mention in passing that.",
    "In the middle ages it was often the case.",
    "The characteristic feature of their work.",
    "Which was at first of a very light color.",
    "Most of the type is of the Roman letter.",
    "It is the best of all.",
    "But the types were all cut.",
    "As a rule, the early printers.",
    "He was a good scholar.",
]


def write_data(root, n_train=8, n_val=4, sampling_rate=8000, seed=0):
    """Writes root/wavs/*.wav (16-bit mono, 0.05-0.1 s of noisy tones drawn from `seed`) and root/train.txt,
    root/val.txt (`path|text` lines, the paths relative to root's parent: the side's cwd)."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "wavs"), exist_ok=True)
    rel = os.path.basename(os.path.normpath(root))
    lines = []
    for i in range(n_train + n_val):
        n = int(rng.integers(sampling_rate // 20, sampling_rate // 10))
        t = np.arange(n) / sampling_rate
        f0 = rng.uniform(100, 1000)
        x = 0.4 * np.sin(2 * np.pi * f0 * t) + 0.05 * rng.standard_normal(n)
        pcm = np.clip(x * 32767, -32768, 32767).astype("<i2")
        name = f"wav_{i:02d}.wav"
        with wave.open(os.path.join(root, "wavs", name), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sampling_rate)
            w.writeframes(pcm.tobytes())
        lines.append(f"{rel}/wavs/{name}|{SENTENCES[i % len(SENTENCES)]}")
    with open(os.path.join(root, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:n_train]) + "\n")
    with open(os.path.join(root, "val.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines[n_train:]) + "\n")
