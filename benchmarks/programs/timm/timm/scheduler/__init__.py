from .cosine_lr import CosineLRScheduler  # noqa: F401, I001
from .multistep_lr import MultiStepLRScheduler  # noqa: F401
from .plateau_lr import PlateauLRScheduler  # noqa: F401
from .poly_lr import PolyLRScheduler  # noqa: F401
from .step_lr import StepLRScheduler  # noqa: F401
from .tanh_lr import TanhLRScheduler  # noqa: F401

from .scheduler_factory import create_scheduler, create_scheduler_v2, scheduler_kwargs  # noqa: F401
