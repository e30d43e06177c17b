# ------------------------------------------------------------------------------
# Copyright (c) Microsoft
# Licensed under the MIT License.
# Written by Ke Sun (sunk@mail.ustc.edu.cn)
# ------------------------------------------------------------------------------
from __future__ import absolute_import  # noqa: I001, UP010
from __future__ import division  # noqa: UP010
from __future__ import print_function  # noqa: UP010

from .default import _C as config  # noqa: F401
from .default import update_config  # noqa: F401
from .models import MODEL_EXTRAS  # noqa: F401
