from .version import __version__
from .layers import is_scriptable, is_exportable, set_scriptable, set_exportable
from .models import create_model, list_models, list_pretrained, is_model, list_modules, model_entrypoint, \
    is_model_pretrained, get_pretrained_cfg, get_pretrained_cfg_value
