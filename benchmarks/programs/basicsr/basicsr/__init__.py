# https://github.com/xinntao/BasicSR
# flake8: noqa
from .archs import *
from .data import *
from .losses import *
from .metrics import *
from .models import *

# from .ops import *  # changed: basicsr.ops (CUDA extensions) not copied
# from .test import *  # changed: test.py not copied
# from .train import *  # changed: train.py is the script beside the package
from .utils import *
# from .version import __gitsha__, __version__  # changed: version.py is written by setup.py (not run)
