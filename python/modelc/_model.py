"""modelc.Model: a Core ML model opened and run by modelc."""

from __future__ import annotations

import ctypes
import io
import json
import os
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native as native
from ._errors import ClosedError, InputError

try:  # Pillow is a dependency, but modelc runs numeric models without it.
    from PIL import Image as _PILImage
except ImportError:  # pragma: no cover
    _PILImage = None

PathLike = Union[str, "os.PathLike[str]"]

#: Core ML's multi-array element types as NumPy dtypes.
DTYPES = {"FLOAT32": np.float32, "DOUBLE": np.float64, "FLOAT64": np.float64, "FLOAT16": np.float16, "INT32": np.int32}
_NATIVE_DTYPES = {np.dtype(np.float32): native.FLOAT32, np.dtype(np.float64): native.FLOAT64,
                  np.dtype(np.float16): native.FLOAT16, np.dtype(np.int32): native.INT32}
_OUTPUT_DTYPES = {native.FLOAT32: np.float32, native.FLOAT64: np.float64, native.FLOAT16: np.float16,
                  native.INT32: np.int32, native.INT64: np.int64}


def _name(value: Any) -> bytes:
    return str(value).encode("utf-8")


class _Handle:
    """A C handle shared by calls on several threads: freed once no call uses it."""

    def __init__(self, pointer: int, free, what: str) -> None:
        self._pointer = pointer
        self._free = free
        self._what = what
        self._users = 0
        self._closed = False
        self._lock = threading.Lock()

    def acquire(self) -> int:
        with self._lock:
            if self._closed:
                raise ClosedError("%s is closed" % self._what, 64)
            self._users += 1
            return self._pointer

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            free_now = self._closed and self._users == 0 and self._pointer
            pointer = self._pointer
            if free_now:
                self._pointer = None
        if free_now:
            self._free(pointer)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            free_now = self._users == 0 and self._pointer
            pointer = self._pointer
            if free_now:
                self._pointer = None
        if free_now:
            self._free(pointer)

    @property
    def closed(self) -> bool:
        return self._closed


class State:
    """The persistent state of a stateful program, for ``Model.predict(..., state=)``.

    Made by ``Model.make_state()``; ``close()`` frees it (also as a context manager).
    """

    def __init__(self, model: "Model", pointer: int) -> None:
        self._model = model
        self._handle = _Handle(pointer, native.library().modelc_state_free, "the state")

    def close(self) -> None:
        """Frees the state; predicting with it afterwards raises ``ClosedError``."""
        self._handle.close()

    def __enter__(self) -> "State":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class Model:
    """A Core ML model opened by modelc, shaped like ``coremltools.models.MLModel``.

    ``path`` is an ``.mlmodel`` or ``.mlpackage`` (compiled into modelc's cache,
    ``$MODELC_CACHE/compiled``, and reused while up to date) or a compiled
    ``.mlmodelc`` bundle. ``threads`` bounds the threads of a batch (default:
    every core). A model is safe to use from many threads at once; the GIL is
    released while modelc computes.

    Raises ``ModelFileError`` for a file that cannot be read or is not a valid
    model, ``UnsupportedModelError`` for a model kind or layer modelc does not run.
    """

    def __init__(self, path: PathLike, threads: Optional[int] = None) -> None:
        lib = native.library()
        self.path = os.fspath(path)
        pointer = ctypes.c_void_p()
        native.check(lib.modelc_open(_name(self.path), int(threads or 0), ctypes.byref(pointer)))
        self._handle = _Handle(pointer.value, lib.modelc_close, "the model %s" % self.path)
        text = ctypes.c_void_p()
        native.check(lib.modelc_describe(pointer, ctypes.byref(text)))
        self._description = json.loads(native.take_string(text))
        self._inputs = {feature["name"]: feature for feature in self._description.get("inputs", [])}
        self._outputs = {feature["name"]: feature for feature in self._description.get("outputs", [])}

    # Description -----------------------------------------------------------

    @property
    def description(self) -> Dict[str, Any]:
        """The whole description, as ``modelc inspect --json`` prints it."""
        return self._description

    @property
    def input_description(self) -> Dict[str, Dict[str, Any]]:
        """Each input's description (type, data type, shape, image size, …) by name, in declaration order."""
        return dict(self._inputs)

    @property
    def output_description(self) -> Dict[str, Dict[str, Any]]:
        """Each output's description by name, in declaration order."""
        return dict(self._outputs)

    @property
    def metadata(self) -> Dict[str, Any]:
        """Author, license, short description, version and user-defined metadata."""
        return dict(self._description.get("metadata", {}))

    @property
    def class_labels(self) -> List[Union[str, int]]:
        """A classifier's labels in the model's order (also the columns of ``predict_batch``'s probabilities)."""
        labels = self._description.get("classLabels")
        return list(labels.get("labels", [])) if labels else []

    @property
    def model_type(self) -> str:
        """The model's kind as the schema names it (``treeEnsembleClassifier``, ``mlProgram``, …)."""
        return self._description.get("modelType", "")

    # Predictions -----------------------------------------------------------

    def predict(self, data: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]],
                state: Optional[State] = None) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
        """The outputs for one set of inputs (a dict), or for a batch (a list of dicts, in order, on every core).

        Inputs are NumPy arrays (cast to the declared dtype), numbers, strings,
        dicts, PIL images or encoded image bytes (an image of another size than
        a fixed-size input's is center-cropped and scaled to it, as Vision
        does; a flexible input takes the sizes it declares). Outputs are as
        coremltools gives them: arrays of the declared dtype and shape, PIL
        images, dicts of class probabilities, Python scalars.

        Raises ``InputError`` naming the input at fault (a batch: the first
        failed row, ``error.row``), ``ClosedError`` after ``close()``.
        """
        if isinstance(data, Mapping):
            return self._predict_one(data, state)
        if state is not None:
            raise InputError("a batch cannot share one state; predict its rows one by one", 93)
        return self._predict_many(list(data))

    def _predict_one(self, data: Mapping[str, Any], state: Optional[State]) -> Dict[str, Any]:
        lib = native.library()
        features = self._features(data)
        try:
            model = self._handle.acquire()
            try:
                state_pointer = None
                if state is not None:
                    if not isinstance(state, State):
                        raise InputError("state is a %s, expected a modelc State" % type(state).__name__, 93)
                    state_pointer = state._handle.acquire()
                try:
                    outputs = ctypes.c_void_p()
                    native.check(lib.modelc_predict(model, features, state_pointer, ctypes.byref(outputs)))
                finally:
                    if state is not None and state_pointer is not None:
                        state._handle.release()
            finally:
                self._handle.release()
            try:
                return self._read(outputs)
            finally:
                lib.modelc_features_free(outputs)
        finally:
            lib.modelc_features_free(features)

    def _predict_many(self, rows: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        lib = native.library()
        if not rows:
            return []
        sets = []
        try:
            for index, row in enumerate(rows):
                if not isinstance(row, Mapping):
                    raise InputError("row %d is a %s, expected a dict of inputs" % (index, type(row).__name__), 93)
                try:
                    sets.append(self._features(row))
                except InputError as error:
                    error.row = index
                    raise
            inputs = (ctypes.c_void_p * len(sets))(*sets)
            outputs = (ctypes.c_void_p * len(sets))()
            model = self._handle.acquire()
            try:
                lib.modelc_predict_many(model, inputs, len(sets), outputs)
            finally:
                self._handle.release()
            try:
                results = []
                for index, output in enumerate(outputs):
                    status = lib.modelc_features_status(output)
                    if status != 0:
                        error = native.error_for(status, (lib.modelc_features_error(output) or b"").decode("utf-8", "replace"))
                        error.row = index
                        raise error
                    results.append(self._read(output))
                return results
            finally:
                for output in outputs:
                    lib.modelc_features_free(output)
        finally:
            for features in sets:
                lib.modelc_features_free(features)

    def predict_batch(self, columns: Mapping[str, Any]) -> Dict[str, Any]:
        """A batch given as columns: each input an array whose first axis is the row.

        Tree ensembles and SVM classifiers evaluate the rows straight from the
        arrays (no per-row dictionaries); other models run row by row. Either
        way rows are shared among every core, in order. Returns a dict of
        arrays whose first axis is the row: labels (int64 or str), and a
        classifier's probabilities as rows × classes in ``class_labels`` order.
        """
        lib = native.library()
        features = lib.modelc_features_new()
        try:
            for name, column in columns.items():
                description = self._inputs.get(name)
                array = np.asarray(column)
                if array.dtype.kind not in "biuf":
                    raise InputError("column \"%s\" has dtype %s, expected numbers" % (name, array.dtype), 93)
                dtype = np.float64
                if description is not None and description.get("type") == "multiArrayType":
                    dtype = DTYPES.get(description.get("dataType", "DOUBLE"), np.float64)
                array = np.ascontiguousarray(array, dtype=dtype)
                self._add_array(features, name, array)
            model = self._handle.acquire()
            try:
                outputs = ctypes.c_void_p()
                native.check(lib.modelc_predict_columns(model, features, ctypes.byref(outputs)))
            finally:
                self._handle.release()
            try:
                return self._read(outputs)
            finally:
                lib.modelc_features_free(outputs)
        finally:
            lib.modelc_features_free(features)

    def make_state(self) -> State:
        """A new state for a stateful program (its state tensors zero).

        Raises ``InputError`` when the model declares no state.
        """
        lib = native.library()
        state = ctypes.c_void_p()
        model = self._handle.acquire()
        try:
            native.check(lib.modelc_make_state(model, ctypes.byref(state)))
        finally:
            self._handle.release()
        return State(self, state.value)

    # Generation ------------------------------------------------------------

    def generate(self, input_ids: Any, max_new_tokens: int, temperature: float = 0.0, top_k: int = 0,
                 seed: int = 0) -> Iterator[int]:
        """Token ids a decoder generates after the prompt ``input_ids``, yielded one by one as they are chosen.

        The model is a decoder in Apple's stateful form (``inputIds``, ``causalMask``, the key/value caches as
        states, ``logits``): the prompt runs once, then one token per prediction on one state; a decoder
        without states gets the whole sequence at every step (as ``modelc generate`` does). ``temperature`` 0
        picks the likeliest token; above 0 samples from the ``top_k`` likeliest (0: all) with a generator
        seeded by ``seed``.

        The prompt is checked before this returns: ``GenerationError`` for a model that is not a decoder (107),
        a token outside the vocabulary (108) or more tokens than the model's context (109); ``UsageError``
        for an empty prompt or a bad number. A failing prediction raises from the iteration.
        """
        ids = np.asarray(input_ids)
        if ids.dtype.kind not in "iu" and ids.size:
            raise InputError("input_ids must be integers, got %s" % ids.dtype, 93)
        prompt = np.ascontiguousarray(ids.reshape(-1), dtype=np.int64)
        lib = native.library()
        generation = ctypes.c_void_p()
        model = self._handle.acquire()
        try:
            native.check(lib.modelc_generate_start(
                model, prompt.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), prompt.size, int(max_new_tokens),
                float(temperature), int(top_k), int(seed), ctypes.byref(generation)))
        except BaseException:
            self._handle.release()
            raise
        return self._tokens(_Handle(generation.value, lib.modelc_generation_free, "the generation"))

    def _tokens(self, generation: "_Handle") -> Iterator[int]:
        """The tokens of a started generation; the model stays open until the last one (or the iterator's end)."""
        lib = native.library()
        token, done = ctypes.c_int64(), ctypes.c_int32()
        try:
            pointer = generation.acquire()
            try:
                while True:
                    native.check(lib.modelc_generate_next(pointer, ctypes.byref(token), None, ctypes.byref(done)))
                    if done.value:
                        return
                    yield int(token.value)
            finally:
                generation.release()
        finally:
            generation.close()
            self._handle.release()

    # Life ------------------------------------------------------------------

    def close(self) -> None:
        """Releases the model; predictions running on other threads finish first. Later calls raise ``ClosedError``."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            try:
                handle.close()
            except Exception:  # pragma: no cover - interpreter shutdown
                pass

    def __repr__(self) -> str:
        inputs = ", ".join(self._inputs)
        outputs = ", ".join(self._outputs)
        return "modelc.Model(%r, %s, inputs: %s; outputs: %s)" % (self.path, self.model_type, inputs, outputs)

    # Values ----------------------------------------------------------------

    def _features(self, data: Mapping[str, Any]) -> int:
        lib = native.library()
        features = lib.modelc_features_new()
        try:
            for name, value in data.items():
                self._add(features, str(name), value)
        except BaseException:
            lib.modelc_features_free(features)
            raise
        return features

    def _add_array(self, features: int, name: str, array: np.ndarray) -> None:
        shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
        native.check(native.library().modelc_features_add_array(
            features, _name(name), _NATIVE_DTYPES[array.dtype], shape, array.ndim, array.ctypes.data))

    def _add(self, features: int, name: str, value: Any) -> None:
        lib = native.library()
        description = self._inputs.get(name, {})
        kind = description.get("type")
        key = _name(name)
        if _PILImage is not None and isinstance(value, _PILImage.Image) and description.get("colorSpace") == "GRAYSCALE_FLOAT16":
            # Float pixels (Core ML's one-component half-float buffer): a PIL image of mode F, as an array.
            if value.mode != "F":
                raise InputError("input \"%s\" is a PIL image of mode %s: a GRAYSCALE_FLOAT16 image must be of type "
                                 "PIL.Image.Image with mode=='F'" % (name, value.mode), 93)
            self._add_array(features, name, np.ascontiguousarray(np.asarray(value, dtype=np.float32)[np.newaxis, np.newaxis]))
            return
        if _PILImage is not None and isinstance(value, _PILImage.Image):
            fixed = kind == "imageType" and "enumeratedSizes" not in description and "imageSizeRange" not in description
            if fixed and value.size != (description.get("width"), description.get("height")):
                # A fixed-size input given another size: modelc fits it as Vision does (center crop, then scale).
                encoded = io.BytesIO()
                value.save(encoded, format="PNG")
                data = encoded.getvalue()
                native.check(lib.modelc_features_add_encoded_image(features, key, data, len(data)))
                return
            gray = description.get("colorSpace", "").startswith("GRAYSCALE")
            image = value.convert("L" if gray else "RGB")
            pixels = np.ascontiguousarray(np.asarray(image, dtype=np.uint8))
            native.check(lib.modelc_features_add_pixels(
                features, key, native.PIXELS_GRAY if gray else native.PIXELS_RGB,
                image.width, image.height, 0, pixels.ctypes.data))
            return
        if isinstance(value, (bytes, bytearray, memoryview)) and kind == "imageType":
            data = bytes(value)
            native.check(lib.modelc_features_add_encoded_image(features, key, data, len(data)))
            return
        if kind == "imageType":
            raise InputError("input \"%s\" is a %s, expected a PIL image or encoded image bytes" % (name, type(value).__name__), 93)
        if isinstance(value, str) or kind == "stringType":
            if not isinstance(value, str):
                raise InputError("input \"%s\" is a %s, expected a string" % (name, type(value).__name__), 93)
            native.check(lib.modelc_features_add_string(features, key, _name(value)))
            return
        if isinstance(value, Mapping):
            keys = list(value.keys())
            values = (ctypes.c_double * max(1, len(keys)))(*[float(value[k]) for k in keys])
            if all(isinstance(k, str) for k in keys):
                names = (ctypes.c_char_p * max(1, len(keys)))(*[_name(k) for k in keys])
                native.check(lib.modelc_features_add_string_dictionary(features, key, len(keys), names, values))
            else:
                try:
                    numbers = (ctypes.c_int64 * max(1, len(keys)))(*[int(k) for k in keys])
                except (TypeError, ValueError):
                    raise InputError("input \"%s\": dictionary keys must be all strings or all integers" % name, 93) from None
                native.check(lib.modelc_features_add_int64_dictionary(features, key, len(keys), numbers, values))
            return
        if kind == "sequenceType":
            items = list(value)
            wants_strings = description.get("elementType", "stringType" if items and isinstance(items[0], str) else "int64Type")
            if wants_strings == "stringType" and all(isinstance(item, str) for item in items):
                strings = (ctypes.c_char_p * max(1, len(items)))(*[_name(item) for item in items])
                native.check(lib.modelc_features_add_string_sequence(features, key, len(items), strings))
            else:
                numbers = (ctypes.c_int64 * max(1, len(items)))(*[int(item) for item in items])
                native.check(lib.modelc_features_add_int64_sequence(features, key, len(items), numbers))
            return
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise InputError("input \"%s\" has dtype %s, expected numbers%s" % (
                name, array.dtype, " (%s)" % description["dataType"] if "dataType" in description else ""), 93)
        if kind == "doubleType" or (kind is None and array.ndim == 0 and array.dtype.kind == "f"):
            if array.size != 1:
                raise InputError("input \"%s\" has shape %s, expected a double" % (name, array.shape), 93)
            native.check(lib.modelc_features_add_double(features, key, float(array.reshape(()))))
            return
        if kind == "int64Type" or (kind is None and array.ndim == 0):
            if array.size != 1:
                raise InputError("input \"%s\" has shape %s, expected an int64" % (name, array.shape), 93)
            scalar = array.reshape(())
            if array.dtype.kind == "f" and float(scalar) != int(scalar):
                raise InputError("input \"%s\" is %r, expected an int64" % (name, float(scalar)), 93)
            native.check(lib.modelc_features_add_int64(features, key, int(scalar)))
            return
        dtype = DTYPES.get(description.get("dataType", ""), None)
        if dtype is None:
            dtype = array.dtype if array.dtype in _NATIVE_DTYPES else np.float64
        self._add_array(features, name, np.ascontiguousarray(array, dtype=dtype))

    def _read(self, outputs: ctypes.c_void_p) -> Dict[str, Any]:
        lib = native.library()
        values: Dict[str, Any] = {}
        for index in range(lib.modelc_features_count(outputs)):
            name = lib.modelc_features_name(outputs, index).decode("utf-8")
            kind = lib.modelc_features_kind(outputs, index)
            if kind in (native.KIND_DOUBLE, native.KIND_INT64):
                number, integer = ctypes.c_double(), ctypes.c_int64()
                native.check(lib.modelc_features_get_number(outputs, index, ctypes.byref(number), ctypes.byref(integer)))
                values[name] = number.value if kind == native.KIND_DOUBLE else integer.value
            elif kind == native.KIND_STRING:
                values[name] = lib.modelc_features_get_string(outputs, index).decode("utf-8")
            elif kind == native.KIND_ARRAY:
                dtype, rank = ctypes.c_int32(), ctypes.c_int32()
                shape, data = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_void_p()
                native.check(lib.modelc_features_get_array(outputs, index, ctypes.byref(dtype), ctypes.byref(rank),
                                                           ctypes.byref(shape), ctypes.byref(data)))
                dims = tuple(shape[axis] for axis in range(rank.value))
                element = np.dtype(_OUTPUT_DTYPES[dtype.value])
                count = int(np.prod(dims)) if dims else 1
                buffer = (ctypes.c_char * (count * element.itemsize)).from_address(data.value) if count else b""
                values[name] = np.frombuffer(buffer, dtype=element, count=count).reshape(dims).copy()
            elif kind == native.KIND_IMAGE:
                layout, width, height, row = ctypes.c_int32(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
                data = ctypes.c_void_p()
                native.check(lib.modelc_features_get_image(outputs, index, ctypes.byref(layout), ctypes.byref(width),
                                                           ctypes.byref(height), ctypes.byref(row), ctypes.byref(data)))
                raw = ctypes.string_at(data.value, row.value * height.value)
                mode, channels = {native.PIXELS_RGB: ("RGB", 3), native.PIXELS_GRAY: ("L", 1),
                                  native.PIXELS_RGBA: ("RGBA", 4)}.get(layout.value, ("RGBA", 4))
                pixels = np.frombuffer(raw, dtype=np.uint8).reshape(height.value, row.value)[:, :width.value * channels]
                pixels = pixels.reshape(height.value, width.value, channels) if channels > 1 else pixels
                if layout.value == native.PIXELS_BGRA:
                    pixels = pixels[..., [2, 1, 0, 3]]
                elif layout.value == native.PIXELS_ARGB:
                    pixels = pixels[..., [1, 2, 3, 0]]
                values[name] = _PILImage.fromarray(np.ascontiguousarray(pixels), mode) if _PILImage else pixels.copy()
            else:
                count = ctypes.c_size_t()
                strings = ctypes.POINTER(ctypes.c_char_p)()
                integers = ctypes.POINTER(ctypes.c_int64)()
                doubles = ctypes.POINTER(ctypes.c_double)()
                native.check(lib.modelc_features_get_entries(outputs, index, ctypes.byref(count), ctypes.byref(strings),
                                                             ctypes.byref(integers), ctypes.byref(doubles)))
                n = count.value
                if kind == native.KIND_STRING_DICTIONARY:
                    values[name] = {strings[i].decode("utf-8"): doubles[i] for i in range(n)}
                elif kind == native.KIND_INT64_DICTIONARY:
                    values[name] = {integers[i]: doubles[i] for i in range(n)}
                elif kind == native.KIND_STRING_SEQUENCE:
                    values[name] = [strings[i].decode("utf-8") for i in range(n)]
                elif kind == native.KIND_INT64_SEQUENCE:
                    values[name] = [integers[i] for i in range(n)]
                else:  # a column of strings
                    values[name] = np.array([strings[i].decode("utf-8") for i in range(n)])
            description = self._outputs.get(name, {})
            if description.get("type") == "imageType" and isinstance(values[name], np.ndarray):
                values[name] = _image_from_array(values[name], description)
        return values


def _image_from_array(array: np.ndarray, description: Mapping[str, Any]) -> Any:
    """An image output the engine gave as a tensor ([1,] C, H, W, values 0-255) as a PIL image.

    A ``GRAYSCALE_FLOAT16`` output keeps its values as float pixels (PIL mode ``F``), as Core ML
    gives a one-component half-float buffer; other images are 8-bit.
    """
    while array.ndim > 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 3 and array.shape[0] in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    color_space = description.get("colorSpace", "RGB")
    if color_space == "GRAYSCALE_FLOAT16" and array.ndim == 2:
        floats = np.ascontiguousarray(array, dtype=np.float32)
        return _PILImage.fromarray(floats, "F") if _PILImage is not None else floats
    pixels = np.clip(np.rint(array), 0, 255).astype(np.uint8)
    if pixels.ndim == 3 and color_space == "BGR":
        pixels = pixels[..., ::-1]
    if _PILImage is None:  # pragma: no cover
        return pixels
    return _PILImage.fromarray(np.ascontiguousarray(pixels), "L" if pixels.ndim == 2 else ("RGBA" if pixels.shape[-1] == 4 else "RGB"))


def compile_model(path: PathLike, output: Optional[PathLike] = None) -> str:
    """Compiles an ``.mlmodel``/``.mlpackage`` into a ``.mlmodelc`` bundle and returns its path.

    Without ``output`` the bundle goes into modelc's cache (``$MODELC_CACHE/compiled``),
    reused while up to date with the source. Raises ``ModelFileError`` (a
    file that cannot be read, fails validation or cannot be written).
    """
    lib = native.library()
    result = ctypes.c_void_p()
    native.check(lib.modelc_compile(_name(os.fspath(path)), _name(os.fspath(output)) if output is not None else None,
                                    ctypes.byref(result)))
    return native.take_string(result)


def fetch(url: str, sha256: Optional[str] = None, offline: bool = False) -> str:
    """Downloads ``url`` into modelc's cache (resuming, retrying, unpacking archives) and returns the model's path.

    ``sha256`` pins the file; ``offline`` answers from the cache only. Raises ``FetchError``.
    """
    lib = native.library()
    result = ctypes.c_void_p()
    native.check(lib.modelc_fetch(_name(url), _name(sha256) if sha256 else None, 1 if offline else 0, ctypes.byref(result)))
    return native.take_string(result)
