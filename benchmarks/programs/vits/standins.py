"""Stand-ins for what jaywalnut310/vits imports but this checkout cannot install (librosa, scipy, tensorboard,
matplotlib, the Cython monotonic_align.core) and for LJSpeech (a few short waveforms drawn from a fixed seed, written
as 16-bit PCM wav files with filelists of already-cleaned text, as the program reads them). Not part of the authors'
program: every use of this module in their files is marked `# changed:`."""

from __future__ import annotations

import os
import wave

import numpy as np

# --- librosa.filters.mel (librosa 0.8 defaults: Slaney mel scale, htk=False, norm="slaney", float32) ---


def _hz_to_mel(frequencies):
    frequencies = np.asanyarray(frequencies)
    f_min, f_sp = 0.0, 200.0 / 3
    mels = (frequencies - f_min) / f_sp
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    if frequencies.ndim:
        log_t = frequencies >= min_log_hz
        mels[log_t] = min_log_mel + np.log(frequencies[log_t] / min_log_hz) / logstep
    elif frequencies >= min_log_hz:
        mels = min_log_mel + np.log(frequencies / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels):
    mels = np.asanyarray(mels)
    f_min, f_sp = 0.0, 200.0 / 3
    freqs = f_min + f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def librosa_mel_fn(sr, n_fft, n_mels=128, fmin=0.0, fmax=None):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax): the same filterbank, in numpy."""
    if fmax is None:
        fmax = float(sr) / 2
    n_mels = int(n_mels)
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


# --- scipy.io.wavfile.read (16-bit mono PCM) ---


def read(path):
    """scipy.io.wavfile.read for 16-bit mono PCM: (sampling rate, int16 samples)."""
    with wave.open(path, "rb") as f:
        rate = f.getframerate()
        data = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").copy()
    return rate, data


# --- torch.utils.tensorboard.SummaryWriter (tensorboard is not installed): writes nothing ---


class SummaryWriter:
    def __init__(self, log_dir=None, **kwargs):
        self.log_dir = log_dir

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


# --- matplotlib (not installed): utils.plot_*_to_numpy draw nothing, an empty RGB image ---


def plot_to_numpy(array):
    return np.zeros((2, 2, 3), dtype=np.uint8)


# --- monotonic_align/core.pyx maximum_path_c, the same loops in Python over float32 numpy arrays ---


_MAX_NEG_VAL = np.float32(-1e9)  # core.pyx: float max_neg_val=-1e9


def _maximum_path_each(path, value, t_y, t_x, max_neg_val=_MAX_NEG_VAL):
    index = t_x - 1
    for y in range(t_y):
        for x in range(max(0, t_x + y - t_y), min(t_x, y + 1)):
            if x == y:
                v_cur = max_neg_val
            else:
                v_cur = value[y - 1, x]
            if x == 0:
                if y == 0:
                    v_prev = np.float32(0.0)
                else:
                    v_prev = max_neg_val
            else:
                v_prev = value[y - 1, x - 1]
            value[y, x] = np.float32(value[y, x] + max(v_prev, v_cur))
    for y in range(t_y - 1, -1, -1):
        path[y, index] = 1
        if index != 0 and (index == y or value[y - 1, index] < value[y - 1, index - 1]):
            index = index - 1


def maximum_path_c(paths, values, t_ys, t_xs):
    for i in range(paths.shape[0]):
        _maximum_path_each(paths[i], values[i], int(t_ys[i]), int(t_xs[i]))


# --- LJSpeech stand-in: short waveforms from a fixed seed, filelists of already-cleaned text ---

SAMPLING_RATE = 8000
_LETTERS = "abdefhiklmnoprstuvwzæðŋɑɔəɛɪʃʊʌˈː"


def write_wavs(data_dir: str, n_train: int = 16, n_val: int = 2, seed: int = 0) -> None:
    """data_dir/wavs/*.wav (16-bit mono PCM, 640 to 1280 samples at 8 kHz: a few decaying tones and noise) and
    data_dir/train.txt, data_dir/val.txt ("path|cleaned text" lines, as ljs_audio_text_*_filelist.txt.cleaned)."""
    rng = np.random.default_rng(seed)
    wavs = os.path.join(data_dir, "wavs")
    os.makedirs(wavs, exist_ok=True)
    lines = []
    for i in range(n_train + n_val):
        n = int(rng.integers(640, 1281))
        t = np.arange(n) / SAMPLING_RATE
        f0 = rng.uniform(100, 400)
        y = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 2 * np.pi)) / k for k in (1, 2, 3))
        y = 0.3 * y * np.exp(-t * rng.uniform(1, 5)) + 0.01 * rng.standard_normal(n)
        pcm = np.clip(y * 32767 / 2, -32768, 32767).astype("<i2")
        path = os.path.join(wavs, f"LJ{i:03d}.wav")
        with wave.open(path, "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(SAMPLING_RATE)
            f.writeframes(pcm.tobytes())
        words = [
            "".join(_LETTERS[j] for j in rng.integers(0, len(_LETTERS), int(rng.integers(2, 5))))
            for _ in range(int(rng.integers(2, 4)))
        ]
        lines.append(f"data/wavs/LJ{i:03d}.wav|{' '.join(words)}.")
    with open(os.path.join(data_dir, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines[:n_train]) + "\n")
    with open(os.path.join(data_dir, "val.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines[n_train:]) + "\n")
