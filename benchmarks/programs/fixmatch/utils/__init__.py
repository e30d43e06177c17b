# ruff: noqa
from .misc import *
