"""coremltools' predictions on Linux, through modelc.

    import modelc.coremltools
    modelc.coremltools.enable()
    import coremltools as ct
    ct.models.MLModel("Model.mlpackage").predict({"x": x})

``enable()`` patches coremltools (tested with 9.0) so that
``MLModel.predict()`` (with ``state=``), ``MLModel.make_state()`` and
``CompiledMLModel`` run through modelc when Core ML's own framework is not
there; on macOS nothing is changed unless ``force=True``.

``enable(pretend_macos=True)`` (what ``python -m modelc.coremltools pytest …``
does) also makes coremltools' tests believe they run on macOS 15, so that the
tests shipped in the wheel predict and compare instead of skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
import weakref
from typing import Any, Dict, Optional

import numpy as np

from .._errors import InputError, ModelFileError

_enabled = False
_lock = threading.Lock()
#: The macOS version coremltools' tests are told when pretending.
PRETENDED_MACOS = (15, 0)


def _open(mlmodel: Any):
    """The modelc model behind an ``MLModel``, opened once (saved to a temporary file first when in memory)."""
    import modelc

    cached = getattr(mlmodel, "_modelc_model", None)
    if cached is not None and not cached.closed:
        return cached
    path = getattr(mlmodel, "package_path", None) if getattr(mlmodel, "is_package", False) else None
    if not path or not os.path.exists(path):
        directory = tempfile.mkdtemp(prefix="modelc-coremltools-")
        # Kept while the MLModel lives (the model may be reloaded from it), removed after.
        weakref.finalize(mlmodel, shutil.rmtree, directory, True)
        path = os.path.join(directory, "model.mlpackage" if getattr(mlmodel, "is_package", False) else "model.mlmodel")
        if getattr(mlmodel, "is_package", False):
            mlmodel.save(path)
        else:
            from coremltools.models.utils import save_spec
            save_spec(mlmodel._spec, path)
    try:
        model = modelc.Model(path)
    except ModelFileError as error:
        raise CompileError('Error compiling model: "%s".' % error, error.status) from error
    mlmodel._modelc_model = model
    return model


class CompileError(ModelFileError, RuntimeError):
    """A model modelc cannot load (it fails validation or its plan): Core ML's binding raises
    ``RuntimeError`` ("Error compiling model") there, so this is one too, as well as modelc's
    ``ModelFileError``."""


def _conform(values: Dict[str, Any], model=None) -> Dict[str, Any]:
    """coremltools' inputs as modelc reads them: tensors (torch, TensorFlow) as NumPy arrays; the
    keys of a dictionary given for a string-keyed input as strings, as Core ML's binding reads them."""
    converted = {}
    for name, value in values.items():
        if isinstance(value, dict) and model is not None \
                and model.input_description.get(name, {}).get("keyType") == "stringKeyType":
            value = {key if isinstance(key, str) else str(key): item for key, item in value.items()}
        if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
            value = value.detach().cpu().numpy() if hasattr(value, "detach") else value.numpy()
        elif isinstance(value, list) and value and not isinstance(value[0], (str, dict)):
            value = np.asarray(value)
        converted[name] = value
    return converted


class ComputationError(InputError, RuntimeError):
    """A prediction that failed while computing, on a value an operation
    computed (an index outside its axis): Core ML raises ``RuntimeError``
    ("Unable to compute the prediction using ML Program") there, so this is
    one too, as well as modelc's ``InputError``."""


def _computation_error(model, error: InputError) -> Optional[ComputationError]:
    """``error`` as a computation failure when the feature it names is not one of the model's inputs."""
    match = re.match(r'feature "([^"]+)"', str(error))
    if match is None or match.group(1) in model.input_description:
        return None
    kind = "ML Program" if model.model_type == "mlProgram" else "a neural network model"
    return ComputationError("Unable to compute the prediction using %s. modelc: %s" % (kind, error))


class ShapeError(InputError, RuntimeError):
    """An input of a shape its flexible declaration does not allow: Core ML's binding raises
    ``RuntimeError`` there, with its own wording (which this message starts with), so this is
    one too, as well as modelc's ``InputError``."""


def _shape_error(model, error: InputError, data) -> Optional[ShapeError]:
    """``error`` in Core ML's words when it is an input outside its shape ranges or enumerated shapes."""
    match = re.match(r'input "([^"]+)" has shape', str(error))
    if match is None or not isinstance(data, dict) or match.group(1) not in data:
        return None
    description = model.input_description.get(match.group(1), {})
    shape = tuple(int(size) for size in np.shape(data[match.group(1)]))
    if "enumeratedShapes" in description:
        text = "MultiArray Shape (%s) was not in enumerated set of allowed shapes" % " x ".join(map(str, shape))
    elif "shapeRange" in description and len(description["shapeRange"]) == len(shape):
        for axis, (size, (lower, upper)) in enumerate(zip(shape, description["shapeRange"])):
            if size < lower or (upper >= 0 and size > upper):
                text = "Size (%d) of dimension (%d) is not in allowed range (%d..%s)" % (
                    size, axis, lower, upper if upper >= 0 else "inf")
                break
        else:
            return None
    else:
        return None
    return ShapeError("%s. modelc: %s" % (text, error))


class ImageModeError(InputError, TypeError):
    """A PIL image of another mode than a GRAYSCALE_FLOAT16 input takes (``F``): Core ML's
    binding raises ``TypeError`` there, so this is one too, as well as modelc's ``InputError``."""


def _as_core_ml_outputs(outputs):
    """Outputs as Core ML's binding gives them: a colour image output is an RGBA image (Core ML's
    32-bit BGRA pixel buffer, opaque), where modelc gives RGB."""
    for name, value in outputs.items():
        if getattr(value, "mode", None) == "RGB" and hasattr(value, "convert"):
            outputs[name] = value.convert("RGBA")
    return outputs


def _predict(model, data, state):
    from coremltools.models.model import MLModel

    MLModel._check_predict_data(data)
    modelc_state = getattr(state, "_modelc_state", state)
    try:
        if isinstance(data, dict):
            return _as_core_ml_outputs(model.predict(_conform(data, model), state=modelc_state))
        if state is not None:
            raise AssertionError("State can only be used for unbatched predictions")
        return [_as_core_ml_outputs(row) for row in model.predict([_conform(row, model) for row in data])]
    except InputError as error:
        translated = _computation_error(model, error) or _shape_error(model, error, data)
        if translated is None and "mode=='F'" in str(error):
            translated = ImageModeError(str(error))
        if translated is None:
            raise
        raise translated from error


class _ModelcState:
    """What the patched ``make_state()`` returns: coremltools' ``MLState`` role over a modelc state."""

    def __init__(self, state) -> None:
        self._modelc_state = state
        self.__proxy__ = state


def enable(force: bool = False, pretend_macos: bool = False) -> bool:
    """Makes coremltools predict through modelc; returns whether it patched anything.

    Idempotent. ``force`` patches even where Core ML itself is available
    (macOS); ``pretend_macos`` also tells coremltools' own tests that they run
    on macOS ``PRETENDED_MACOS`` so that they predict.
    """
    global _enabled
    import coremltools
    from coremltools.models import model as model_module
    from coremltools.models import _compiled_model as compiled_module

    with _lock:
        if pretend_macos:
            _pretend_macos()
        if _enabled:
            return True
        if model_module._MLModelProxy is not None and not force:
            return False
        MLModel = model_module.MLModel
        CompiledMLModel = compiled_module.CompiledMLModel

        def predict(self, data, state=None):
            """Predictions through modelc (patched in by ``modelc.coremltools.enable()``)."""
            return _predict(_open(self), data, state)

        def make_state(self):
            """A state for a stateful program, through modelc."""
            return _ModelcState(_open(self).make_state())

        def compiled_init(self, path, compute_units=None, function_name=None, optimization_hints=None, asset=None):
            import modelc
            if not isinstance(path, str) and hasattr(path, "__fspath__"):
                path = os.fspath(path)
            if not isinstance(path, str):
                raise TypeError('The "path" parameter must be of type "str".')
            self.compute_unit = compute_units
            self.function_name = function_name
            self.optimization_hints = optimization_hints
            self._modelc_model = modelc.Model(path)

        def compiled_predict(self, data, state=None):
            return _predict(self._modelc_model, data, state)

        def compiled_make_state(self):
            return _ModelcState(self._modelc_model.make_state())

        def get_compiled_model_path(self):
            """The model compiled by modelc into a directory kept while this ``MLModel`` lives."""
            import modelc
            compiled = getattr(self, "_modelc_compiled_path", None)
            if compiled is None:
                directory = tempfile.mkdtemp(prefix="modelc-compiled-")
                weakref.finalize(self, shutil.rmtree, directory, True)
                compiled = modelc.compile_model(_open(self).path, os.path.join(directory, "model.mlmodelc"))
                self._modelc_compiled_path = compiled
            return compiled

        MLModel.predict = predict
        MLModel.make_state = make_state
        MLModel.get_compiled_model_path = get_compiled_model_path
        import coremltools.models.utils as utils_module
        utils_module.compile_model = _compile_model
        CompiledMLModel.__init__ = compiled_init
        CompiledMLModel.predict = compiled_predict
        CompiledMLModel.make_state = compiled_make_state
        _enabled = True
        return True


def _compile_model(model, destination_path: Optional[str] = None) -> str:
    """coremltools' ``compile_model`` through modelc (patched in by ``enable()``): a spec or an
    ``.mlmodel``/``.mlpackage`` path compiled into ``destination_path`` or, without one, a new
    temporary ``.mlmodelc`` directory the caller removes, as Core ML's does."""
    import modelc
    from coremltools.models.model import MLModel
    from coremltools.proto import Model_pb2

    if isinstance(model, str):
        if not model.rstrip("/").endswith((".mlpackage", ".mlmodel")):
            raise ValueError(f"Invalid model file path: '{model}'.Expected a file with .mlpackage or .model extension. ")
    elif isinstance(model, MLModel):
        raise TypeError('This model has already been compiled. Call "get_compiled_model_path" to get the compiled model.')
    elif not isinstance(model, Model_pb2.Model):
        raise TypeError('Unrecognized input for "model" parameter. It should be a spec or model file path.')
    if destination_path is not None and not destination_path.rstrip("/").endswith(".mlmodelc"):
        raise Exception('"destination_path" parameter must have ".mlmodelc" file extension.')
    destination = destination_path or tempfile.mkdtemp(prefix="modelc-", suffix=".mlmodelc")
    if isinstance(model, str):
        return modelc.compile_model(model, destination)
    with tempfile.TemporaryDirectory(prefix="modelc-spec-") as directory:
        from coremltools.models.utils import save_spec
        source = os.path.join(directory, "spec.mlmodel")
        save_spec(model, source)
        return modelc.compile_model(source, destination)


def _pretend_macos() -> None:
    """Tells coremltools (and its tests, imported later) they run on macOS 15."""
    import coremltools._deps as deps
    import coremltools.models.utils as utils

    deps._IS_MACOS = True
    utils._macos_version = lambda: PRETENDED_MACOS
    utils._is_macos = lambda: True
    for name in list(sys.modules):
        module = sys.modules[name]
        if name.startswith("coremltools") and module is not None:
            if hasattr(module, "_IS_MACOS"):
                module._IS_MACOS = True
            if getattr(module, "_macos_version", None) is not None and name != "coremltools.models.utils":
                module._macos_version = utils._macos_version
