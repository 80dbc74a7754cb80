"""modelc's exceptions, one per class of failure of the C interface's status codes."""

from __future__ import annotations


class ModelError(Exception):
    """A modelc failure; ``str(error)`` is modelc's one-line message.

    ``status`` is the class of failure, numbered as the ``modelc`` command's
    exit codes (see the table in docs/cli.md, "Exit codes").
    """

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class InputError(ModelError, ValueError):
    """An input is missing, unknown, of the wrong type, dtype or shape, or a value the model cannot take (93)."""


class UnsupportedModelError(ModelError):
    """The model is of a kind, or holds a layer or operation, that modelc does not run (94)."""


class ModelFileError(ModelError, OSError):
    """The model file or bundle cannot be read, is not Core ML, is damaged or fails validation (65-80)."""


class FetchError(ModelError):
    """A download failed, did not match its SHA-256, or held no model (81-88)."""


class ImageError(InputError):
    """An image input could not be decoded (97)."""


class ClosedError(ModelError, ValueError):
    """The model or state was closed (freed) before use."""


class GenerationError(ModelError, ValueError):
    """A prompt or model ``Model.generate`` cannot take: not a decoder (107), a token outside the vocabulary (108),
    more tokens than the model's context (109)."""


class UsageError(ModelError, ValueError):
    """A bad argument reached the C interface (64)."""


def error_for(status: int, message: str) -> ModelError:
    """The exception for a status of the C interface."""
    if status == 93:
        return InputError(message, status)
    if status == 97:
        return ImageError(message, status)
    if status == 94:
        return UnsupportedModelError(message, status)
    if status == 64:
        return UsageError(message, status)
    if 65 <= status <= 80:
        return ModelFileError(message, status)
    if 81 <= status <= 88:
        return FetchError(message, status)
    if 107 <= status <= 109:
        return GenerationError(message, status)
    return ModelError(message, status)
