"""Stand-ins for what hifi-gan imports and this machine lacks: librosa's mel filter bank and normalize,
scipy.io.wavfile.read, tensorboard's SummaryWriter; and the synthetic data set both sides read (LJSpeech stood in
for by a few waveforms drawn from a fixed seed, written as 16-bit PCM wav files by `write_wavs`)."""

from __future__ import annotations

import os
import wave

import numpy as np

# ---- librosa.filters.mel (librosa 0.8: Slaney's mel scale, htk=False, norm="slaney"), the same arithmetic


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


def mel(sr, n_fft, n_mels=128, fmin=0.0, fmax=None, dtype=np.float32):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) with its defaults (htk=False, norm='slaney')."""
    if fmax is None:
        fmax = float(sr) / 2
    n_mels = int(n_mels)
    weights = np.zeros((n_mels, int(1 + n_fft // 2)), dtype=dtype)
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


# ---- librosa.util.normalize (norm=inf, axis=0, threshold=tiny, fill=None) on a 1-d signal


def normalize(S):
    length = np.max(np.abs(S))
    if length < np.finfo(S.dtype).tiny:
        length = 1.0
    return S / length


# ---- scipy.io.wavfile.read for 16-bit PCM mono: (rate, int16 array)


def read(path):
    with wave.open(str(path), "rb") as f:
        rate = f.getframerate()
        data = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.int16)
    return rate, data


# ---- torch.utils.tensorboard.SummaryWriter: nothing written


class SummaryWriter:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


# ---- the data set: LJSpeech stood in for


def write_wavs(root, n_train=8, n_val=2, length=3000, rate=22050, seed=0):
    """root/wavs/*.wav (sums of three sines and noise, 16-bit PCM), root/training.txt, root/validation.txt (the
    LJSpeech metadata format: `name|text`)."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, "wavs"), exist_ok=True)
    names = [f"LJ{i:03d}" for i in range(n_train + n_val)]
    t = np.arange(length) / rate
    for name in names:
        freqs = rng.uniform(80, 4000, size=3)
        amps = rng.uniform(0.1, 0.3, size=3)
        y = sum(a * np.sin(2 * np.pi * f * t) for a, f in zip(amps, freqs)) + 0.02 * rng.standard_normal(length)
        pcm = np.clip(y * 32767, -32768, 32767).astype("<i2")
        with wave.open(os.path.join(root, "wavs", name + ".wav"), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(rate)
            f.writeframes(pcm.tobytes())
    with open(os.path.join(root, "training.txt"), "w") as f:
        f.write("".join(f"{n}|text\n" for n in names[:n_train]))
    with open(os.path.join(root, "validation.txt"), "w") as f:
        f.write("".join(f"{n}|text\n" for n in names[n_train:]))
