from .version import __version__  # noqa: F401, I001
from .layers import is_scriptable, is_exportable, set_scriptable, set_exportable  # noqa: F401
from .models import (
    create_model,  # noqa: F401
    list_models,  # noqa: F401
    list_pretrained,  # noqa: F401
    is_model,  # noqa: F401
    list_modules,  # noqa: F401
    model_entrypoint,  # noqa: F401
    is_model_pretrained,  # noqa: F401
    get_pretrained_cfg,  # noqa: F401
    get_pretrained_cfg_value,  # noqa: F401
)
