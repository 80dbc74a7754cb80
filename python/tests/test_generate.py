"""Model.generate: the Llama-shaped int4 decoder of Fixtures/Models (Apple's stateful form), against the greedy
tokens PyTorch float64 computed (Fixtures/llama_decoder.py), sampling, and every refusal."""

import json

import numpy as np
import pytest

import modelc
from conftest import FIXTURES

DECODER = FIXTURES / "Models" / "LlamaDecoderInt4.mlpackage"


@pytest.fixture(scope="module")
def decoder():
    model = modelc.Model(DECODER)
    yield model
    model.close()


@pytest.fixture(scope="module")
def reference():
    return json.loads((FIXTURES / "Models" / "LlamaDecoderInt4.json").read_text())


def test_greedy_tokens_are_pytorchs(decoder, reference):
    tokens = decoder.generate(reference["prompt"], max_new_tokens=len(reference["greedy"]))
    assert list(tokens) == reference["greedy"]
    # A NumPy prompt of another integer type gives the same.
    again = decoder.generate(np.array([reference["prompt"]], dtype=np.int32), max_new_tokens=3)
    assert list(again) == reference["greedy"][:3]


def test_tokens_are_yielded_one_by_one_and_the_iterator_can_stop_early(decoder, reference):
    tokens = decoder.generate(reference["prompt"], max_new_tokens=6)
    assert next(tokens) == reference["greedy"][0]
    assert next(tokens) == reference["greedy"][1]
    tokens.close()
    with pytest.raises(StopIteration):
        next(tokens)


def test_seeded_sampling_repeats_and_top_1_is_greedy(decoder, reference):
    first = list(decoder.generate([5, 6, 7], max_new_tokens=10, temperature=1.5, seed=3))
    assert first == list(decoder.generate([5, 6, 7], max_new_tokens=10, temperature=1.5, seed=3))
    assert first != list(decoder.generate([5, 6, 7], max_new_tokens=10, temperature=1.5, seed=4))
    greedy = list(decoder.generate([5, 6, 7], max_new_tokens=10))
    assert list(decoder.generate([5, 6, 7], max_new_tokens=10, temperature=2.0, top_k=1, seed=9)) == greedy


@pytest.mark.parametrize("prompt, new, status, words", [
    ([1, 96], 2, 108, "token 96 is outside the model's vocabulary of 96 ids"),
    ([65541], 2, 108, "token 65541 is outside"),
    ([1, 2], 40, 109, "42 tokens (prompt and new tokens) exceed the model's context of 32 positions"),
])
def test_bad_prompts_raise_before_anything_runs(decoder, prompt, new, status, words):
    with pytest.raises(modelc.GenerationError) as raised:
        decoder.generate(prompt, max_new_tokens=new)
    assert raised.value.status == status
    assert words in str(raised.value)


def test_bad_arguments_are_usage_errors(decoder):
    with pytest.raises(modelc.UsageError, match="the prompt has no tokens"):
        decoder.generate([], max_new_tokens=2)
    with pytest.raises(modelc.UsageError, match="max_new_tokens must be at least 1"):
        decoder.generate([1], max_new_tokens=0)
    with pytest.raises(modelc.UsageError, match="temperature must be 0 or more"):
        decoder.generate([1], max_new_tokens=2, temperature=-1)
    with pytest.raises(modelc.InputError, match="input_ids must be integers"):
        decoder.generate([1.5], max_new_tokens=2)


def test_a_model_that_is_not_a_decoder(fixtures):
    with modelc.Model(fixtures / "Models" / "GLMClassifier.mlmodel") as model:
        with pytest.raises(modelc.GenerationError) as raised:
            model.generate([1], max_new_tokens=2)
    assert raised.value.status == 107
    assert "not a decoder" in str(raised.value)
