"""A minimal Thrift compact-protocol reader and writer, to rewrite Parquet footers in tests.

A struct decodes to a dict ``{field_id: (type, value)}`` (lists to ``(elem_type, [values])``),
which the tests edit in place and encode again: enough to build footers no writer would make.
Field ids below follow ``parquet.thrift``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

# Compact-protocol type codes.
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)

# parquet.thrift field ids used by the tests.
FILE_NUM_ROWS, FILE_ROW_GROUPS = 3, 4
RG_COLUMNS, RG_NUM_ROWS, RG_TOTAL_COMPRESSED = 1, 3, 6
CC_FILE_OFFSET, CC_META = 2, 3
CM_NUM_VALUES, CM_TOTAL_COMPRESSED, CM_DATA_PAGE_OFFSET, CM_DICT_PAGE_OFFSET = 5, 7, 9, 11

Struct = dict[int, tuple[int, Any]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t: int) -> Any:
        if t in (TRUE, FALSE):  # inside a list a bool is a byte
            return self.byte() == 1
        if t == BYTE:
            return self.byte()
        if t in (I16, I32, I64):
            return self.zigzag()
        if t == DOUBLE:
            v = struct.unpack_from("<d", self.data, self.pos)[0]
            self.pos += 8
            return v
        if t == BINARY:
            n = self.varint()
            v = self.data[self.pos : self.pos + n]
            self.pos += n
            return v
        if t in (LIST, SET):
            h = self.byte()
            size, et = h >> 4, h & 0x0F
            if size == 15:
                size = self.varint()
            return (et, [self.value(et) for _ in range(size)])
        if t == STRUCT:
            return self.struct()
        raise ValueError(f"unsupported thrift type {t}")

    def struct(self) -> Struct:
        out: Struct = {}
        fid = 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            t, delta = h & 0x0F, h >> 4
            fid = fid + delta if delta else self.zigzag()
            if t in (TRUE, FALSE):
                out[fid] = (t, t == TRUE)
            else:
                out[fid] = (t, self.value(t))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _value(t: int, v: Any) -> bytes:
    if t in (TRUE, FALSE):
        return bytes([1 if v else 2])
    if t == BYTE:
        return bytes([v & 0xFF])
    if t in (I16, I32, I64):
        return _zigzag(v)
    if t == DOUBLE:
        return struct.pack("<d", v)
    if t == BINARY:
        return _varint(len(v)) + bytes(v)
    if t in (LIST, SET):
        et, items = v
        head = bytes([(len(items) << 4) | et]) if len(items) < 15 else bytes([0xF0 | et])
        size = b"" if len(items) < 15 else _varint(len(items))
        return head + size + b"".join(_value(et, x) for x in items)
    if t == STRUCT:
        return encode(v)
    raise ValueError(f"unsupported thrift type {t}")


def encode(s: Struct) -> bytes:
    out = bytearray()
    last = 0
    for fid in sorted(s):
        t, v = s[fid]
        if t in (TRUE, FALSE):
            t = TRUE if v else FALSE
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | t)
        else:
            out.append(t)
            out += _zigzag(fid)
        if t not in (TRUE, FALSE):
            out += _value(t, v)
        last = fid
    out.append(0)
    return bytes(out)


def read_footer(path: Path) -> tuple[bytes, Struct]:
    """The bytes before the footer and the decoded FileMetaData."""
    data = path.read_bytes()
    assert data[-4:] == b"PAR1"
    n = struct.unpack_from("<i", data, len(data) - 8)[0]
    start = len(data) - 8 - n
    return data[:start], _Reader(data[start : start + n]).struct()


def write_footer(path: Path, body: bytes, meta: Struct) -> None:
    footer = encode(meta)
    path.write_bytes(body + footer + struct.pack("<i", len(footer)) + b"PAR1")


def row_groups(meta: Struct) -> list[Struct]:
    return list(meta[FILE_ROW_GROUPS][1][1])


def column_meta(rg: Struct, column: int) -> Struct:
    chunk: Struct = rg[RG_COLUMNS][1][1][column]
    meta: Struct = chunk[CC_META][1]
    return meta


def set_i64(s: Struct, fid: int, value: int) -> None:
    s[fid] = (I64, value)
