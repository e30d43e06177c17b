# ------------------------------------------------------------------------------
# Copyright (c) Microsoft
# Licensed under the MIT License.
# Written by Ke Sun (sunk@mail.ustc.edu.cn)
# ------------------------------------------------------------------------------

from __future__ import absolute_import  # noqa: I001, UP010
from __future__ import division  # noqa: UP010
from __future__ import print_function  # noqa: UP010

import os.path as osp
import sys


def add_path(path):
    if path not in sys.path:
        sys.path.insert(0, path)


this_dir = osp.dirname(__file__)

lib_path = osp.join(this_dir, "..", "lib")
add_path(lib_path)
add_path(osp.join(this_dir, ".."))  # changed: standins.py (yacs, cv2, tensorboardX stand-ins)
