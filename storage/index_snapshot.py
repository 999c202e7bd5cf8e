"""The RocksDB store's in-memory index saved at close, so a clean reopen need not read every record.

    magic:4  version:4  stamp:8  last_seq:8  last_ts:8  bytes:8  msgs:8  subjects:8
    chunks:8  subjects_len:8
    subjects (UTF-8, "\\n"-separated: a subject cannot hold a newline)
    runs: one u64 per subject (its count of runs of consecutive sequences), then every
      run's first sequence (u64 each) and every run's length (u64 each), subject by subject
    chunk numbers (u64 each), then the chunks' bitmaps (CHUNK_BITS / 8 bytes each)
    hash:8 (BLAKE2b-64 of everything before it)

Version 1 kept every sequence of every subject (counts: one u64 per subject, then the
sequences); it is still read. Integers are little-endian. `stamp` is the store's write generation when the
blob was saved (storage/rocks.py): every later write to the store moves it, so
an index saved by a clean close is trusted only if the store is still at exactly
that generation, and the store falls back to scanning the records otherwise (a
crash, or a writer that did not save the index).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator
from hashlib import blake2b

from storage.index import StreamIndex, SubjectSeqs, seqs_first, single_entry
from storage.seq_list import SeqList
from storage.seq_set import CHUNK_BITS, SeqSet

_MAGIC = b"JRIX"
_VERSION = 2
_VERSION_EVERY_SEQUENCE = 1
_HEADER = struct.Struct("<4sIQQqQQQQQ")
_HASH_LEN = 8
_CHUNK_BYTES = CHUNK_BITS // 8


def _u64_array(values: array) -> array:
    """`values` in the blob's byte order (swapped in place on a big-endian machine)."""
    if sys.byteorder != "little":
        values.byteswap()
    return values


def encode_index(index: StreamIndex, stamp: int) -> bytes:
    """The blob for `index`, valid while the store's write generation is `stamp`."""
    names = list(index.subjects)
    run_counts = array("Q")
    starts = array("Q")
    lengths = array("Q")
    for name in names:
        entry = index.subjects[name]
        if isinstance(entry, int):
            run_counts.append(1)
            starts.append(seqs_first(entry))
            lengths.append(1)
        else:
            before = len(starts)
            for start, length in entry.runs():
                starts.append(start)
                lengths.append(length)
            run_counts.append(len(starts) - before)
    subjects = "\n".join(names).encode()
    chunk_keys, chunk_masks = index.live.chunks()
    header = _HEADER.pack(
        _MAGIC,
        _VERSION,
        stamp,
        index.last_seq,
        index.last_ts,
        index.bytes,
        index.msgs,
        len(names),
        len(chunk_keys),
        len(subjects),
    )
    body = b"".join(
        [
            header,
            subjects,
            _u64_array(run_counts).tobytes(),
            _u64_array(starts).tobytes(),
            _u64_array(lengths).tobytes(),
            _u64_array(array("Q", chunk_keys)).tobytes(),
            b"".join(mask.to_bytes(_CHUNK_BYTES, "little") for mask in chunk_masks),
        ]
    )
    return body + blake2b(body, digest_size=_HASH_LEN).digest()


def decode_index(blob: bytes, stamp: int) -> StreamIndex | None:
    """The index in `blob` if it is intact and was saved at write generation `stamp`, else None."""
    if len(blob) < _HEADER.size + _HASH_LEN:
        return None
    body = memoryview(blob)[:-_HASH_LEN]
    if blake2b(body, digest_size=_HASH_LEN).digest() != blob[-_HASH_LEN:]:
        return None
    magic, version, saved_stamp, last_seq, last_ts, size, msgs, n_subjects, n_chunks, subjects_len = (
        _HEADER.unpack_from(blob)
    )
    if magic != _MAGIC or version not in (_VERSION, _VERSION_EVERY_SEQUENCE) or saved_stamp != stamp:
        return None
    offset = _HEADER.size
    names = bytes(body[offset : offset + subjects_len]).decode().split("\n") if n_subjects else []
    offset += subjects_len
    counts = _read_u64(body, offset, n_subjects)
    offset += 8 * n_subjects
    if len(names) != n_subjects:
        return None
    if version == _VERSION_EVERY_SEQUENCE:
        if sum(counts) != msgs:
            return None
        seqs = _read_u64(body, offset, msgs)
        offset += 8 * msgs
        entries = _entries_of_sequences(counts, seqs)
    else:
        total_runs = sum(counts)
        starts = _read_u64(body, offset, total_runs)
        lengths = _read_u64(body, offset + 8 * total_runs, total_runs)
        offset += 16 * total_runs
        if len(lengths) != total_runs or sum(lengths) != msgs or 0 in lengths:
            return None
        entries = _entries_of_runs(counts, starts, lengths)
    chunk_keys = _read_u64(body, offset, n_chunks)
    offset += 8 * n_chunks
    if offset + n_chunks * _CHUNK_BYTES != len(body):
        return None
    if chunk_keys.tolist() != sorted(set(chunk_keys)):
        return None
    masks = [
        int.from_bytes(body[start : start + _CHUNK_BYTES], "little")
        for start in range(offset, len(body), _CHUNK_BYTES)
    ]
    if not all(masks):
        return None
    live = SeqSet.from_chunks(chunk_keys.tolist(), masks)
    if len(live) != msgs:
        return None

    index = StreamIndex()
    subjects: dict[str, SubjectSeqs] = {}
    insert = index.tree.insert
    for name, entry in zip(names, entries, strict=True):
        subjects[name] = entry
        insert(name)
    index.live = live
    index.subjects = subjects
    index.bytes = size
    index.last_seq = last_seq
    index.last_ts = last_ts
    return index


def _entries_of_sequences(counts: array, seqs: array) -> Iterator[SubjectSeqs]:
    """Each subject's sequences from a version 1 blob: `counts[i]` sequences each, in order."""
    position = 0
    for count in counts:
        yield single_entry(seqs[position]) if count == 1 else SeqList.from_array(seqs[position : position + count])
        position += count


def _entries_of_runs(run_counts: array, starts: array, lengths: array) -> Iterator[SubjectSeqs]:
    """Each subject's sequences from its runs: `run_counts[i]` runs each, in order."""
    position = 0
    for count in run_counts:
        if count == 1 and lengths[position] == 1:
            yield single_entry(starts[position])
        else:
            yield SeqList.from_runs(starts[position : position + count], lengths[position : position + count])
        position += count


def _read_u64(body: memoryview, offset: int, count: int) -> array:
    values = array("Q")
    values.frombytes(body[offset : offset + 8 * count])
    return _u64_array(values)
