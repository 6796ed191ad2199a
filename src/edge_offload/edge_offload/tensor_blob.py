# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Convert between NumPy arrays and ``offload_interfaces/TensorBlob`` messages.

Received messages are validated before use: an unknown dtype, a shape whose element
count does not match the payload, or a payload over the caller's limit raises
``TensorBlobError`` with a message that says which. Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import math

import numpy as np

from offload_interfaces.msg import TensorBlob

# TensorBlob dtype constant -> NumPy dtype (always little-endian on the wire).
_NUMPY_DTYPE_OF_BLOB_DTYPE: dict[int, np.dtype] = {
    TensorBlob.DTYPE_FLOAT32: np.dtype('<f4'),
    TensorBlob.DTYPE_FLOAT16: np.dtype('<f2'),
    TensorBlob.DTYPE_FLOAT64: np.dtype('<f8'),
    TensorBlob.DTYPE_UINT8: np.dtype('u1'),
    TensorBlob.DTYPE_INT8: np.dtype('i1'),
    TensorBlob.DTYPE_INT16: np.dtype('<i2'),
    TensorBlob.DTYPE_INT32: np.dtype('<i4'),
    TensorBlob.DTYPE_INT64: np.dtype('<i8'),
    TensorBlob.DTYPE_BOOL: np.dtype('?'),
}
# NumPy has no bfloat16: it travels as raw 16-bit words and is decoded by torch users.
_BFLOAT16_ITEMSIZE = 2
# (kind, itemsize) identifies a NumPy dtype whatever its byte order.
_BLOB_DTYPE_OF_KIND_AND_SIZE: dict[tuple[str, int], int] = {
    (dtype.kind, dtype.itemsize): blob_dtype
    for blob_dtype, dtype in _NUMPY_DTYPE_OF_BLOB_DTYPE.items()
}

# Default ceiling on one tensor's payload: a 4K RGB float32 image is about 100 MB.
DEFAULT_MAX_TENSOR_BYTES = 128 * 1024 * 1024


class TensorBlobError(ValueError):
    """A TensorBlob message that cannot be turned into an array."""


def blob_dtype_itemsize(blob_dtype: int) -> int:
    """Return the size in bytes of one element of a TensorBlob dtype constant."""
    if blob_dtype == TensorBlob.DTYPE_BFLOAT16:
        return _BFLOAT16_ITEMSIZE
    try:
        return _NUMPY_DTYPE_OF_BLOB_DTYPE[blob_dtype].itemsize
    except KeyError:
        raise TensorBlobError(f'unknown TensorBlob dtype {blob_dtype}') from None


def to_tensor_blob(name: str, array: np.ndarray) -> TensorBlob:
    """Pack a NumPy array into a TensorBlob (row-major, little-endian)."""
    try:
        blob_dtype = _BLOB_DTYPE_OF_KIND_AND_SIZE[(array.dtype.kind, array.dtype.itemsize)]
    except KeyError:
        raise TensorBlobError(f'tensor {name!r}: dtype {array.dtype} is not supported') from None
    wire_dtype = _NUMPY_DTYPE_OF_BLOB_DTYPE[blob_dtype]
    # asarray, not ascontiguousarray: the latter turns a 0-d scalar into shape (1,).
    contiguous = np.asarray(array, dtype=wire_dtype, order='C')
    blob = TensorBlob()
    blob.name = name
    blob.dtype = blob_dtype
    blob.shape = [int(dim) for dim in contiguous.shape]
    blob.data = contiguous.tobytes()
    return blob


def from_tensor_blob(blob: TensorBlob, *, max_bytes: int = DEFAULT_MAX_TENSOR_BYTES) -> np.ndarray:
    """Unpack a TensorBlob into a new NumPy array after checking it is consistent."""
    itemsize = blob_dtype_itemsize(blob.dtype)
    if blob.dtype == TensorBlob.DTYPE_BFLOAT16:
        raise TensorBlobError(
            f'tensor {blob.name!r}: bfloat16 has no NumPy type; decode it with torch'
        )
    shape = tuple(int(dim) for dim in blob.shape)
    expected_bytes = itemsize * math.prod(shape)
    if expected_bytes > max_bytes:
        raise TensorBlobError(
            f'tensor {blob.name!r}: shape {shape} needs {expected_bytes} bytes, '
            f'over the limit of {max_bytes}'
        )
    if len(blob.data) != expected_bytes:
        raise TensorBlobError(
            f'tensor {blob.name!r}: shape {shape} of dtype {blob.dtype} needs '
            f'{expected_bytes} bytes but data holds {len(blob.data)}'
        )
    dtype = _NUMPY_DTYPE_OF_BLOB_DTYPE[blob.dtype]
    return np.frombuffer(memoryview(blob.data), dtype=dtype).reshape(shape).copy()
