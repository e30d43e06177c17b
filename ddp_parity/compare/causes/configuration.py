"""The setup facts two runs are compared on: which keys of meta.json change the numbers a run
computes, and which of them differ between two runs (`config_differences`).

Pure Python, no torch: the setup causes (causes/setup.py) and the harness's controls read it.
"""

from __future__ import annotations

import json

# resolved-config keys (dotted) that cannot change the numbers a run computes; a key matches an
# entry or lies below one. LightningCLI's extra keys exist on one side only and are skipped anyway:
# only keys both sides have are compared. `ignore_config` adds to these.
IGNORED_CONFIG_KEYS = (
    "run_dir",
    "ckpt_path",
    "config",
    "checkpoint",
    "weights_only",
    "trainer.enable_progress_bar",
    "trainer.logger",
    "trainer.enable_model_summary",
    "trainer.enable_checkpointing",
    "trainer.default_root_dir",
    "trainer.callbacks",
    "trainer.log_every_n_steps",
    "trainer.enable_autolog_hparams",
    "trainer.profiler",
    "trainer.model_registry",
)
META_KEYS = ("world_size", "backend", "device")  # meta.json facts outside `config` that change numerics
VERSION_KEYS = ("torch",)
RANK_FACT_KEYS = ("threads", "omp_num_threads")
# environment that changes what a rank computes; the launcher's own variables (TORCHELASTIC_*,
# MASTER_ADDR, SLURM_*, GROUP_RANK ...) differ between launchers without changing a bit
NUMERIC_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
# the world as a rank saw it: its rank and the world size decide its shard; local_rank and node_rank
# only say where it ran (they differ between a one-node and a simulated multi-node launch)
WORLD_KEYS = ("rank", "world_size")
SEED_KEY = "seed_everything"


def config_differences(meta_a: dict, meta_b: dict, ignore=()) -> tuple[dict, tuple | None]:
    """{dotted key: (a, b)} for numerics-relevant facts both sides record with different values, and
    the seed_everything pair (kept apart) or None."""
    diffs: dict[str, tuple] = {}
    for key in META_KEYS:
        if key in meta_a and key in meta_b:
            a, b = (_device_type(m[key]) if key == "device" else m[key] for m in (meta_a, meta_b))
            if not same_value(a, b):
                diffs[key] = (meta_a[key], meta_b[key])
    va, vb = meta_a.get("versions") or {}, meta_b.get("versions") or {}
    for key in VERSION_KEYS:
        if key in va and key in vb and not same_value(va[key], vb[key]):
            diffs[f"versions.{key}"] = (va[key], vb[key])
    flat_a, flat_b = flatten(meta_a.get("config") or {}), flatten(meta_b.get("config") or {})
    seed = None
    for key in sorted(set(flat_a) & set(flat_b)):
        if _ignored(key, ignore) or same_value(flat_a[key], flat_b[key]):
            continue
        if key == SEED_KEY:
            seed = (flat_a[key], flat_b[key])
        else:
            diffs[f"config.{key}"] = (flat_a[key], flat_b[key])
    for r, (fa, fb) in enumerate(zip(meta_a.get("ranks") or [], meta_b.get("ranks") or [])):
        r = fa.get("rank", r)
        for key in RANK_FACT_KEYS:
            if key in fa and key in fb and not same_value(fa[key], fb[key]):
                diffs[f"ranks[{r}].{key}"] = (fa[key], fb[key])
        for group, keys in (("torch_flags", None), ("arithmetic", None), ("env", NUMERIC_ENV), ("world", WORLD_KEYS)):
            ga, gb = fa.get(group) or {}, fb.get(group) or {}
            for key in sorted(set(ga) & set(gb)):
                if (keys is None or key in keys) and not same_value(ga[key], gb[key]):
                    diffs[f"ranks[{r}].{group}.{key}"] = (ga[key], gb[key])
    return _collapse_ranks(diffs, len(meta_a.get("ranks") or [])), seed


def config_one_side(meta_a: dict, meta_b: dict, ignore=()) -> dict[str, list[str]]:
    """{"a": keys, "b": keys}: the resolved-config keys one side records and the other does not (not
    compared, so never said to match); empty lists where both record the same keys."""
    flat_a, flat_b = flatten(meta_a.get("config") or {}), flatten(meta_b.get("config") or {})
    return {
        "a": sorted(k for k in set(flat_a) - set(flat_b) if not _ignored(k, ignore)),
        "b": sorted(k for k in set(flat_b) - set(flat_a) if not _ignored(k, ignore)),
    }


def changes_only_rounding(key: str) -> bool:
    """A setup fact that decides how sums round and nothing else: a thread count, the arithmetic."""
    return ".arithmetic." in key or key.endswith(("threads", "OMP_NUM_THREADS", "MKL_NUM_THREADS"))


def _collapse_ranks(diffs: dict, world: int) -> dict:
    """`ranks[*].key` for a per-rank fact that differs the same way on every rank: said once."""
    per_key: dict[str, list] = {}
    for key, pair in diffs.items():
        if key.startswith("ranks["):
            per_key.setdefault(key[key.index("]") + 2 :], []).append(pair)
    out = {}
    for key, pair in diffs.items():
        rest = key[key.index("]") + 2 :] if key.startswith("ranks[") else None
        pairs = per_key.get(rest, [])
        if rest is not None and world > 1 and len(pairs) == world and all(same_value(p, pairs[0]) for p in pairs):
            out.setdefault(f"ranks[*].{rest}", pair)
        else:
            out[key] = pair
    return out


def strip_config(key: str) -> str:
    return key[len("config.") :] if key.startswith("config.") else key


def _device_type(device):
    return device.split(":", 1)[0] if isinstance(device, str) else device


def flatten(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _ignored(key: str, extra=()) -> bool:
    return any(key == k or key.startswith(k + ".") for k in (*IGNORED_CONFIG_KEYS, *extra))


def _normal(value):
    """ "2" and 2 (LightningCLI keeps `devices` a string), 1.0 and 1, tuples and lists compare alike."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (int, float)) and not isinstance(parsed, bool) else value
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def same_value(a, b) -> bool:
    return _normal(a) == _normal(b)
