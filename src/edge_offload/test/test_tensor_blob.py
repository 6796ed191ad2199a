# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""TensorBlob conversion: every dtype round-trips; inconsistent messages are refused."""

import numpy as np
import pytest

from edge_offload.tensor_blob import (
    TensorBlobError,
    blob_dtype_itemsize,
    from_tensor_blob,
    to_tensor_blob,
)
from offload_interfaces.msg import TensorBlob


@pytest.mark.parametrize(
    'dtype', ['float32', 'float16', 'float64', 'uint8', 'int8', 'int16', 'int32', 'int64', 'bool']
)
def test_round_trip_preserves_values_dtype_and_shape(dtype):
    rng = np.random.default_rng(1)
    array = (rng.standard_normal((2, 3, 5)) * 50).astype(dtype)
    blob = to_tensor_blob('x', array)
    assert blob.name == 'x'
    assert list(blob.shape) == [2, 3, 5]
    assert len(blob.data) == array.nbytes
    restored = from_tensor_blob(blob)
    assert restored.dtype == array.dtype
    np.testing.assert_array_equal(restored, array)


def test_non_contiguous_and_big_endian_arrays_travel_little_endian_row_major():
    array = np.arange(12, dtype='>i4').reshape(3, 4).T
    blob = to_tensor_blob('t', array)
    assert bytes(blob.data[:4]) == (0).to_bytes(4, 'little')
    np.testing.assert_array_equal(from_tensor_blob(blob), array)


def test_scalar_has_empty_shape():
    blob = to_tensor_blob('s', np.float32(2.5))
    assert list(blob.shape) == []
    assert from_tensor_blob(blob).item() == 2.5


def test_restored_array_does_not_alias_the_message():
    blob = to_tensor_blob('x', np.zeros(4, dtype=np.uint8))
    restored = from_tensor_blob(blob)
    restored[0] = 7
    assert blob.data[0] == 0


def test_unsupported_numpy_dtype_is_refused():
    with pytest.raises(TensorBlobError, match='complex128'):
        to_tensor_blob('z', np.zeros(2, dtype=np.complex128))


def test_size_mismatch_is_refused_with_the_numbers():
    blob = to_tensor_blob('x', np.zeros((2, 2), dtype=np.float32))
    blob.shape = [2, 3]
    with pytest.raises(TensorBlobError, match='needs 24 bytes but data holds 16'):
        from_tensor_blob(blob)


def test_unknown_dtype_is_refused():
    blob = TensorBlob(name='x', dtype=200, shape=[1], data=b'\x00')
    with pytest.raises(TensorBlobError, match='unknown TensorBlob dtype 200'):
        from_tensor_blob(blob)


def test_oversized_shape_is_refused_before_any_allocation():
    blob = TensorBlob(name='huge', dtype=TensorBlob.DTYPE_FLOAT32, shape=[2**31, 2**31])
    with pytest.raises(TensorBlobError, match='over the limit'):
        from_tensor_blob(blob, max_bytes=1 << 20)


def test_bfloat16_is_sized_but_left_to_torch():
    assert blob_dtype_itemsize(TensorBlob.DTYPE_BFLOAT16) == 2
    blob = TensorBlob(name='b', dtype=TensorBlob.DTYPE_BFLOAT16, shape=[1], data=b'\x00\x00')
    with pytest.raises(TensorBlobError, match='bfloat16'):
        from_tensor_blob(blob)
