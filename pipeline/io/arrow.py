"""Arrow arrays from NumPy arrays and Python lists, without pyarrow's pandas probe.

The first ``pa.array`` / ``pa.table`` of plain values in a process imports pandas (pyarrow's lazy pandas shim
checks every input for pandas objects; apache/arrow#34994).  Nothing here ever converts a pandas object, and in
a cold CPU scan that import was a noticeable share of the GIL-held time (docs/benchmarks.md, "No pandas
import").  These helpers build the same arrays from buffers
(``pa.Array.from_buffers``), which never look for pandas; numeric data is not copied.  Outputs are plain Arrow
arrays: equal to ``pa.array`` of the same values and type (tests/io/test_arrow.py checks that).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
# Arrow's compute kernels are registered when pyarrow.compute is first imported.  ``DictionaryArray.from_arrays``
# imports it lazily, in whichever thread builds the first dictionary, and the Parquet writer looks ``take`` up for
# dictionary columns: once in ~10 in-process scans, a thread wrote before the registration it raced with was
# complete ("No function registered with name: take").  Imported here, with this module, in the importing
# thread: every scan builds dictionaries, so this costs no scan anything it did not already pay.
import pyarrow.compute  # noqa: E402, F401

__all__ = ["column", "strings", "nullable", "scalar", "dictionary", "table", "to_numpy"]


def strings(values) -> pa.Array:
    """A ``string`` (``large_string`` past 2 GiB of text) array of ``values`` (an iterable of ``str``)."""
    encoded = [str(v).encode() for v in values]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = offsets[-1] > np.iinfo(np.int32).max
    typ = pa.large_string() if large else pa.string()
    offsets = offsets if large else offsets.astype(np.int32)
    return pa.Array.from_buffers(typ, len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def column(values, type: pa.DataType | None = None) -> pa.Array:
    """An Arrow array of ``values``: a NumPy array or a list of numbers, bools or strings, without nulls.
    ``type`` (an Arrow type) converts the values to it; without it the NumPy dtype decides."""
    if isinstance(values, pa.Array):
        return values if type is None or values.type == type else values.cast(type)
    if type is not None and (pa.types.is_string(type) or pa.types.is_large_string(type)):
        arr = strings(values)
        return arr if arr.type == type else arr.cast(type)
    arr = np.asarray(values) if type is None else np.asarray(values, dtype=type.to_pandas_dtype())
    if arr.dtype.kind in "UO":
        return strings(arr.tolist())
    if arr.ndim != 1:
        raise ValueError(f"column: a 1-d array is needed, got shape {arr.shape}")
    typ = pa.from_numpy_dtype(arr.dtype)
    if arr.dtype == np.bool_:
        data = np.packbits(arr, bitorder="little")
    else:
        data = np.ascontiguousarray(arr)
    return pa.Array.from_buffers(typ, len(arr), [None, pa.py_buffer(data)])


def nullable(values, type: pa.DataType) -> pa.Array:
    """An array of ``type`` (a string or a numeric type) from a list in which ``None`` entries are nulls."""
    values = list(values)
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        base = column(["" if v is None else v for v in values], type)
    else:
        base = column(np.array([0 if v is None else v for v in values]), type)
    if valid.all():
        return base
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(base.type, len(values), [bitmap] + base.buffers()[1:],
                                 null_count=int(valid.size - valid.sum()))


def scalar(value, type: pa.DataType) -> pa.Scalar:
    """An Arrow scalar (for compute functions: ``pc.equal(a, "-")`` converts its Python scalar with the probe)."""
    return column([value], type)[0]


def dictionary(indices, values: pa.Array) -> pa.DictionaryArray:
    """Dictionary-encoded array: ``values[indices]`` (``indices`` integer, as a NumPy array)."""
    return pa.DictionaryArray.from_arrays(column(indices), values)


def table(columns: dict, schema: pa.Schema | None = None) -> pa.Table:
    """A table of ``{name: values}``; values as :func:`column` takes them (typed by ``schema`` where given)."""
    arrays = {}
    for k, v in columns.items():
        t = schema.field(k).type if schema is not None else None
        if t is not None and pa.types.is_dictionary(t) and not isinstance(v, pa.Array):
            raise TypeError(f"table: column {k!r} is dictionary-typed; build it with dictionary()")
        arrays[k] = column(v, t)
    return pa.table(arrays, schema=schema)


def by_descending(tbl: pa.Table, column_name: str) -> pa.Array:
    """Row indices of ``tbl`` by ``column_name``, largest first, ties in row order (Arrow's sort is stable; no NumPy
    round trip, whose ``to_numpy``/``pa.array`` imports pandas)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    return pc.sort_indices(tbl, sort_keys=[(column_name, "descending")])


def to_numpy(values) -> np.ndarray:
    """A NumPy array of a fixed-width Arrow array or chunked array without nulls (numbers, dictionary indices);
    a view for one chunk.  ``Array.to_numpy`` imports pandas on its first call; this reads the data buffer."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    dtype = np.dtype(values.type.to_pandas_dtype())
    parts = []
    for ch in chunks:
        if ch.null_count or pa.types.is_boolean(ch.type) or not pa.types.is_primitive(ch.type):
            raise TypeError(f"to_numpy: a fixed-width array without nulls is needed, got {ch.type}")
        if len(ch):
            parts.append(np.frombuffer(ch.buffers()[1], dtype=dtype, count=len(ch), offset=ch.offset * dtype.itemsize))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)
