from .asymmetric_loss import AsymmetricLossMultiLabel, AsymmetricLossSingleLabel  # noqa: F401
from .binary_cross_entropy import BinaryCrossEntropy  # noqa: F401
from .cross_entropy import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy  # noqa: F401
from .jsd import JsdCrossEntropy  # noqa: F401
