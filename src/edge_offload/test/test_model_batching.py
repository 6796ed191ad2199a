# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Batched inference of a loaded model: one batch gives each request its own result."""

import torch

from edge_offload.models import InvalidInputError, load_model


def _images(count: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [{'image': torch.rand((1, 3, 64, 64), generator=generator)} for _ in range(count)]


def test_a_batch_of_requests_gives_each_its_own_result():
    model = load_model('tiny_cnn')
    assert model.batchable
    requests = _images(5)
    batched = model.run_batch(requests)
    for inputs, answer in zip(requests, batched, strict=True):
        alone = model(inputs)
        assert set(answer) == {'features'}
        assert answer['features'].shape == alone['features'].shape == (1, 16)
        torch.testing.assert_close(answer['features'], alone['features'], rtol=1e-5, atol=1e-6)
    # a row does not share storage with the batch (it is sent on its own)
    assert batched[0]['features'].untyped_storage().nbytes() == 16 * 4


def test_a_bad_request_fails_alone_and_the_rest_of_the_batch_runs():
    model = load_model('tiny_cnn')
    requests = _images(3)
    requests.insert(1, {'image': torch.rand((1, 3, 32, 32))})  # wrong size for tiny_cnn
    requests.append({'picture': torch.rand((1, 3, 64, 64))})  # wrong input name
    answers = model.run_batch(requests)
    assert isinstance(answers[1], InvalidInputError)
    assert isinstance(answers[4], InvalidInputError)
    for index in (0, 2, 3):
        torch.testing.assert_close(
            answers[index]['features'], model(requests[index])['features'], rtol=1e-5, atol=1e-6
        )
