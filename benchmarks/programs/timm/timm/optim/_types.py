from typing import Any, Dict, Iterable, Union, Protocol, Type  # noqa: I001, UP035

try:
    from typing import TypeAlias, TypeVar
except ImportError:
    from typing_extensions import TypeAlias, TypeVar  # noqa: F401, UP035

import torch
import torch.optim

try:
    from torch.optim.optimizer import ParamsT
except (ImportError, TypeError):
    ParamsT: TypeAlias = Union[Iterable[torch.Tensor], Iterable[Dict[str, Any]]]  # noqa: UP006, UP007


OptimType = Type[torch.optim.Optimizer]  # noqa: UP006


class OptimizerCallable(Protocol):
    """Protocol for optimizer constructor signatures."""

    def __call__(self, params: ParamsT, **kwargs) -> torch.optim.Optimizer: ...


__all__ = ["ParamsT", "OptimType", "OptimizerCallable"]
