"""Batch inference on Ray Data with modelc.

    import ray, modelc.ray
    ds = ray.data.read_binary_files("s3://bucket/images/", include_paths=True)
    predictions = ds.map_batches(modelc.ray.Predictor, fn_constructor_kwargs={"path": "/models/Net.mlmodelc"},
                                 concurrency=8, batch_size=64, batch_format="numpy")

``Predictor`` is a callable class: Ray makes one per actor, so each actor
opens the model once and predicts every batch it is given. Batches are
dicts of NumPy arrays (``batch_format="numpy"``); outputs are added to the
batch as columns of the same length. See docs/distributed.md.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np

from ._errors import InputError
from ._model import Model


class Predictor:
    """A model opened once per Ray actor, predicting NumPy batches.

    ``path``: a model or bundle on every node (a shared file system, or a
    bundle fetched with ``modelc.fetch`` in ``setup``). An image model reads
    ``image_column`` (encoded files, e.g. the ``bytes`` column of
    ``ray.data.read_binary_files``), decoded, turned upright and
    center-cropped by modelc. Other models read the columns named as their
    inputs, through ``predict_batch`` (columnar: no dictionary per row).

    Output columns: every model output; a classifier's probabilities as
    rows × classes in ``class_labels`` order (``<output>`` holds the array),
    labels as an array. Input columns are kept unless ``keep_inputs`` is false.
    ``threads`` bounds modelc's threads per actor (default: the actor's
    ``OMP_NUM_THREADS`` if set, else every core).
    """

    def __init__(self, path: str, image_column: str = "bytes", threads: Optional[int] = None,
                 keep_inputs: bool = True, tag_process: bool = False) -> None:
        if threads is None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            threads = int(os.environ["OMP_NUM_THREADS"])
        self.model = Model(path, threads=threads)
        self.image_column = image_column
        self.keep_inputs = keep_inputs
        self.tag_process = tag_process
        self.image_input = next((name for name, description in self.model.input_description.items()
                                 if description.get("type") == "imageType"), None)

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        rows = len(next(iter(batch.values()))) if batch else 0
        if self.image_input is not None:
            if self.image_column not in batch:
                raise InputError("the batch has no column \"%s\" of encoded images (its columns: %s)"
                                 % (self.image_column, ", ".join(batch)), 93)
            results = self.model.predict([{self.image_input: bytes(item)} for item in batch[self.image_column]])
            outputs = self._columns(results)
        else:
            columns = {name: batch[name] for name in self.model.input_description if name in batch}
            outputs = self.model.predict_batch(columns)
        result = dict(batch) if self.keep_inputs else {}
        result.update(outputs)
        if self.tag_process:
            result["process"] = np.full(rows, os.getpid())
        return result

    def _columns(self, results) -> Dict[str, np.ndarray]:
        labels = self.model.class_labels
        columns: Dict[str, Any] = {}
        for name in self.model.output_description:
            values = [row[name] for row in results]
            if values and isinstance(values[0], dict):
                keys = labels or sorted(values[0])
                columns[name] = np.array([[value.get(key, 0.0) for key in keys] for value in values])
            else:
                columns[name] = np.array(values) if values else np.array([])
        return columns
