from .reader_factory import create_reader  # noqa: F401, I001
from .img_extensions import *  # noqa: F403
