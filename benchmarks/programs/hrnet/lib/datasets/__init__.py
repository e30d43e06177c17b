# ------------------------------------------------------------------------------
# Copyright (c) Microsoft
# Licensed under the MIT License.
# Written by Ke Sun (sunk@mail.ustc.edu.cn)
# ------------------------------------------------------------------------------

from __future__ import absolute_import  # noqa: I001, UP010
from __future__ import division  # noqa: UP010
from __future__ import print_function  # noqa: UP010

from .cityscapes import Cityscapes as cityscapes  # noqa: F401
# from .lip import LIP as lip  # changed: not copied (cityscapes only)
# from .pascal_ctx import PASCALContext as pascal_ctx  # changed: not copied (cityscapes only)
# from .ade20k import ADE20K as ade20k  # changed: not copied (cityscapes only)
# from .cocostuff import COCOStuff as cocostuff  # changed: not copied (cityscapes only)
