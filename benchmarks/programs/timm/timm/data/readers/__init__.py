from .reader_factory import create_reader
from .img_extensions import *
