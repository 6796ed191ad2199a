# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""The server depth net ARISE batches: a batched depth map equals the request's own."""

import torch

from edge_offload.models import load_model


def test_batched_server_depth_equals_each_frame_alone():
    model = load_model('accumo_depth')
    assert model.batchable
    generator = torch.Generator().manual_seed(3)
    frames = [
        {'image': torch.randint(0, 256, (1, 3, 96, 128), generator=generator, dtype=torch.uint8)}
        for _ in range(4)
    ]
    batched = model.run_batch(frames)
    for inputs, answer in zip(frames, batched, strict=True):
        alone = model(inputs)['depth']
        assert answer['depth'].shape == alone.shape == (96, 128)
        torch.testing.assert_close(answer['depth'], alone, rtol=1e-4, atol=1e-4)
