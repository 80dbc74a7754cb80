"""modelc: run Core ML models on Linux from Python.

    import modelc
    m = modelc.Model("MobileNet.mlpackage")
    m.predict({"image": PIL.Image.open("cat.jpg").resize((224, 224))})

The package is pure Python over modelc's C interface (libmodelc), NumPy and
Pillow. ``modelc.coremltools.enable()`` makes coremltools' ``predict()`` run
through modelc; ``modelc.ray`` runs batch inference on Ray Data.
"""

from ._errors import (ClosedError, FetchError, GenerationError, ImageError, InputError, ModelError, ModelFileError,
                      UnsupportedModelError, UsageError)
from ._model import Model, State, compile_model, fetch

__all__ = [
    "Model", "State", "compile_model", "fetch",
    "ModelError", "InputError", "ImageError", "UnsupportedModelError", "ModelFileError", "FetchError",
    "ClosedError", "UsageError", "GenerationError",
]

__version__ = "0.1.0"
