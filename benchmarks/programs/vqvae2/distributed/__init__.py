# ruff: noqa
# changed: the line above (lint of the authors' code left as written)
from .distributed import (
    get_rank,
    get_local_rank,
    is_primary,
    synchronize,
    get_world_size,
    all_reduce,
    all_gather,
    reduce_dict,
    data_sampler,
    LOCAL_PROCESS_GROUP,
)
from .launch import launch
