from typing import Callable, Tuple, Type, Union  # noqa: I001, UP035

import torch


LayerType = Union[str, Callable, Type[torch.nn.Module]]  # noqa: UP006, UP007
PadType = Union[str, int, Tuple[int, int]]  # noqa: UP006, UP007
