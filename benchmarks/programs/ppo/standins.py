"""Stand-ins for what cleanrl's ppo_atari_multigpu.py imports and this machine lacks (not the authors' code):

- `gym`: the part of gymnasium 0.29 the script uses: `gym.make` (a small deterministic Atari-like env, `ToyAtari`:
  observations 4 x 16 x 16 uint8, four frames stacked as FrameStack(4) would give them, each new frame drawn from a
  numpy generator seeded by `reset(seed=...)`; a reward from the action and the state; an episode of EPISODE_LEN
  steps), `gym.wrappers.RecordEpisodeStatistics` (info["episode"] = {"r", "l", "t"} at an episode's end),
  `gym.vector.SyncVectorEnv` (gymnasium 0.29's: `reset(seed=s)` seeds env i with s + i; autoreset in the same step,
  the finished episode's info under infos["final_info"] and its observation under infos["final_observation"]),
  `gym.spaces.Discrete` / `gym.spaces.Box`;
- `tyro.cli(Args)`: tyro's command line from the dataclass (`--field-name`, booleans as `--flag/--no-flag`, `None`
  for an optional value), by argparse;
- `SummaryWriter`: tensorboard is missing; a writer that keeps nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import types
import typing

import numpy as np

EPISODE_LEN = 10
N_ACTIONS = 4
OBS_SHAPE = (4, 16, 16)


class Discrete:
    def __init__(self, n: int):
        self.n = n
        self.shape = ()
        self.dtype = np.int64


class Box:
    def __init__(self, low, high, shape, dtype):
        self.low, self.high, self.shape, self.dtype = low, high, tuple(shape), dtype


class ToyAtari:
    """Four stacked 16 x 16 uint8 frames; the newest frame drawn from the env's generator at every step. Reward 1 when
    the action equals the newest frame's brightest quadrant, 0.1 when it equals the previous action, else 0."""

    def __init__(self, env_id: str):
        self.env_id = env_id
        self.observation_space = Box(0, 255, OBS_SHAPE, np.uint8)
        self.action_space = Discrete(N_ACTIONS)
        self.rng = np.random.default_rng(0)
        self.frames = np.zeros(OBS_SHAPE, np.uint8)
        self.t = 0
        self.last_action = -1

    def get_action_meanings(self):
        return ["NOOP", "UP", "LEFT", "RIGHT"]

    @property
    def unwrapped(self):
        return self

    def _frame(self):
        return self.rng.integers(0, 256, size=OBS_SHAPE[1:], dtype=np.uint8)

    def _target(self) -> int:
        f = self.frames[-1].astype(np.int64)
        quads = [f[:8, :8].sum(), f[:8, 8:].sum(), f[8:, :8].sum(), f[8:, 8:].sum()]
        return int(np.argmax(quads))

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.frames = np.stack([self._frame() for _ in range(OBS_SHAPE[0])])
        self.t = 0
        self.last_action = -1
        return self.frames.copy(), {}

    def step(self, action):
        action = int(action)
        reward = 1.0 if action == self._target() else (0.1 if action == self.last_action else 0.0)
        self.last_action = action
        self.frames = np.concatenate([self.frames[1:], self._frame()[None]])
        self.t += 1
        terminated = self.t >= EPISODE_LEN
        return self.frames.copy(), reward, terminated, False, {}

    def close(self):
        pass


class RecordEpisodeStatistics:
    def __init__(self, env):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.episode_return = 0.0
        self.episode_length = 0
        self.start = time.perf_counter()

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def reset(self, seed=None, options=None):
        self.episode_return, self.episode_length, self.start = 0.0, 0, time.perf_counter()
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += reward
        self.episode_length += 1
        if terminated or truncated:
            info = dict(info)
            info["episode"] = {
                "r": np.array([self.episode_return]),
                "l": np.array([self.episode_length]),
                "t": np.array([round(time.perf_counter() - self.start, 6)]),
            }
        return obs, reward, terminated, truncated, info

    def close(self):
        self.env.close()


class SyncVectorEnv:
    def __init__(self, env_fns):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space

    def reset(self, seed=None, options=None):
        seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        obs = [env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)]
        return np.stack(obs), {}

    def step(self, actions):
        obs, rewards, terms, truncs = [], [], [], []
        final_obs = [None] * self.num_envs
        final_info = [None] * self.num_envs
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            o, r, term, trunc, info = env.step(a)
            if term or trunc:
                final_obs[i], final_info[i] = o, info
                o, _ = env.reset()
            obs.append(o)
            rewards.append(r)
            terms.append(term)
            truncs.append(trunc)
        infos = {}
        if any(x is not None for x in final_info):
            mask = np.array([x is not None for x in final_info])
            infos["final_observation"] = np.array(final_obs, dtype=object)
            infos["_final_observation"] = mask
            infos["final_info"] = np.array(final_info, dtype=object)
            infos["_final_info"] = mask
        return np.stack(obs), np.array(rewards), np.array(terms), np.array(truncs), infos

    def close(self):
        for env in self.envs:
            env.close()


def make(env_id, render_mode=None, **kwargs):
    return ToyAtari(env_id)


gym = types.SimpleNamespace(
    make=make,
    wrappers=types.SimpleNamespace(RecordEpisodeStatistics=RecordEpisodeStatistics),
    vector=types.SimpleNamespace(SyncVectorEnv=SyncVectorEnv),
    spaces=types.SimpleNamespace(Discrete=Discrete, Box=Box),
)


def _none_or(kind):
    def parse(text):
        return None if text == "None" else kind(text)

    return parse


def cli(cls):
    """tyro.cli for a flat dataclass: one `--field-name` an attribute."""
    parser = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kind, args = f.type, typing.get_args(f.type)
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default)
        elif typing.get_origin(kind) is typing.Literal:
            parser.add_argument(flag, dest=f.name, choices=list(args), default=default)
        elif typing.get_origin(kind) is list:
            parser.add_argument(flag, dest=f.name, type=args[0], nargs="*", default=default)
        else:
            parser.add_argument(flag, dest=f.name, type=_none_or(kind), default=default)
    return cls(**vars(parser.parse_args()))


tyro = types.SimpleNamespace(cli=cli)


class SummaryWriter:
    def __init__(self, *args, **kwargs):
        pass

    def add_text(self, *args, **kwargs):
        pass

    def add_scalar(self, *args, **kwargs):
        pass

    def close(self):
        pass
