# ------------------------------------------------------------------------------
# Copyright (c) Microsoft
# Licensed under the MIT License.
# Written by Ke Sun (sunk@mail.ustc.edu.cn)
# ------------------------------------------------------------------------------

from __future__ import absolute_import  # noqa: I001, UP010
from __future__ import division  # noqa: UP010
from __future__ import print_function  # noqa: UP010

import models.seg_hrnet  # noqa: F401
# import models.seg_hrnet_ocr  # changed: not copied (seg_hrnet only)
