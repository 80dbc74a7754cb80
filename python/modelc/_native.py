"""Loading libmodelc and declaring its C functions (include/modelc.h)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading
from typing import List, Optional

from ._errors import error_for

ABI_VERSION = 1

FLOAT32, FLOAT16, FLOAT64, INT32, INT64 = 1, 2, 3, 4, 5
PIXELS_RGB, PIXELS_RGBA, PIXELS_BGRA, PIXELS_ARGB, PIXELS_GRAY = 1, 2, 3, 4, 5
(KIND_DOUBLE, KIND_INT64, KIND_STRING, KIND_ARRAY, KIND_IMAGE, KIND_STRING_DICTIONARY,
 KIND_INT64_DICTIONARY, KIND_STRING_SEQUENCE, KIND_INT64_SEQUENCE, KIND_STRINGS) = range(1, 11)

_p = ctypes.c_void_p
_s = ctypes.c_char_p
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_size = ctypes.c_size_t

# name: (restype, argtypes)
_SIGNATURES = {
    "modelc_abi_version": (_i32, []),
    "modelc_last_error": (_s, []),
    "modelc_last_status": (_i32, []),
    "modelc_string_free": (None, [_p]),
    "modelc_open": (_i32, [_s, _i32, ctypes.POINTER(_p)]),
    "modelc_close": (None, [_p]),
    "modelc_describe": (_i32, [_p, ctypes.POINTER(_p)]),
    "modelc_compile": (_i32, [_s, _s, ctypes.POINTER(_p)]),
    "modelc_fetch": (_i32, [_s, _s, _i32, ctypes.POINTER(_p)]),
    "modelc_features_new": (_p, []),
    "modelc_features_free": (None, [_p]),
    "modelc_features_add_array": (_i32, [_p, _s, _i32, ctypes.POINTER(_i64), _i32, _p]),
    "modelc_features_add_double": (_i32, [_p, _s, ctypes.c_double]),
    "modelc_features_add_int64": (_i32, [_p, _s, _i64]),
    "modelc_features_add_string": (_i32, [_p, _s, _s]),
    "modelc_features_add_pixels": (_i32, [_p, _s, _i32, _i64, _i64, _i64, _p]),
    "modelc_features_add_encoded_image": (_i32, [_p, _s, _p, _size]),
    "modelc_features_add_string_dictionary": (_i32, [_p, _s, _size, ctypes.POINTER(_s), ctypes.POINTER(ctypes.c_double)]),
    "modelc_features_add_int64_dictionary": (_i32, [_p, _s, _size, ctypes.POINTER(_i64), ctypes.POINTER(ctypes.c_double)]),
    "modelc_features_add_string_sequence": (_i32, [_p, _s, _size, ctypes.POINTER(_s)]),
    "modelc_features_add_int64_sequence": (_i32, [_p, _s, _size, ctypes.POINTER(_i64)]),
    "modelc_predict": (_i32, [_p, _p, _p, ctypes.POINTER(_p)]),
    "modelc_predict_many": (_i32, [_p, ctypes.POINTER(_p), _size, ctypes.POINTER(_p)]),
    "modelc_predict_columns": (_i32, [_p, _p, ctypes.POINTER(_p)]),
    "modelc_make_state": (_i32, [_p, ctypes.POINTER(_p)]),
    "modelc_state_free": (None, [_p]),
    "modelc_generate_start": (_i32, [_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, _i32, ctypes.c_double, _i32,
                                     ctypes.c_uint64, ctypes.POINTER(_p)]),
    "modelc_generate_next": (_i32, [_p, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double),
                                    ctypes.POINTER(_i32)]),
    "modelc_generation_free": (None, [_p]),
    "modelc_features_count": (_size, [_p]),
    "modelc_features_status": (_i32, [_p]),
    "modelc_features_error": (_s, [_p]),
    "modelc_features_name": (_s, [_p, _size]),
    "modelc_features_kind": (_i32, [_p, _size]),
    "modelc_features_get_number": (_i32, [_p, _size, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(_i64)]),
    "modelc_features_get_string": (_s, [_p, _size]),
    "modelc_features_get_array": (_i32, [_p, _size, ctypes.POINTER(_i32), ctypes.POINTER(_i32),
                                         ctypes.POINTER(ctypes.POINTER(_i64)), ctypes.POINTER(_p)]),
    "modelc_features_get_image": (_i32, [_p, _size, ctypes.POINTER(_i32), ctypes.POINTER(_i64), ctypes.POINTER(_i64),
                                         ctypes.POINTER(_i64), ctypes.POINTER(_p)]),
    "modelc_features_get_entries": (_i32, [_p, _size, ctypes.POINTER(_size), ctypes.POINTER(ctypes.POINTER(_s)),
                                           ctypes.POINTER(ctypes.POINTER(_i64)), ctypes.POINTER(ctypes.POINTER(ctypes.c_double))]),
}


def candidate_paths() -> List[pathlib.Path]:
    """Where the shared library is looked for, in order.

    ``MODELC_LIBRARY`` (a file), the copy a wheel bundles next to this module,
    then a source checkout's build directories (release before debug).
    """
    paths = []
    explicit = os.environ.get("MODELC_LIBRARY")
    if explicit:
        paths.append(pathlib.Path(explicit))
    here = pathlib.Path(__file__).resolve().parent
    paths.append(here / "libmodelc.so")
    for root in [here.parent.parent] + list(here.parents):
        for configuration in ("release", "debug"):
            paths.append(root / ".build" / configuration / "libModelcC.so")
    seen, unique = set(), []
    for path in paths:
        if path not in seen:
            seen.add(path)
            unique.append(path)
    return unique


_library: Optional[ctypes.CDLL] = None
_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The loaded libmodelc with its functions declared (loaded once)."""
    global _library
    with _lock:
        if _library is not None:
            return _library
        tried = []
        for path in candidate_paths():
            if path.is_file():
                lib = ctypes.CDLL(str(path))
                break
            tried.append(str(path))
        else:
            raise OSError("libmodelc not found; build it (make python-lib) or set MODELC_LIBRARY. Tried: "
                          + ", ".join(tried))
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
        version = lib.modelc_abi_version()
        if version != ABI_VERSION:
            raise OSError("libmodelc at %s has C interface version %d, this package needs %d" % (path, version, ABI_VERSION))
        _library = lib
        return lib


def check(status: int) -> None:
    """Raises the exception for a failed call's status, with the thread's last error."""
    if status != 0:
        message = library().modelc_last_error()
        raise error_for(status, message.decode("utf-8", "replace") if message else "")


def take_string(pointer: ctypes.c_void_p) -> str:
    """A string the library returned, freed after reading."""
    lib = library()
    try:
        return ctypes.string_at(pointer).decode("utf-8")
    finally:
        lib.modelc_string_free(pointer)


def encode(text: str) -> bytes:
    return text.encode("utf-8")
