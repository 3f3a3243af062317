# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``walk_entries`` in ``store/scan.py``: the pull scan's loop over consume-queue entries.

The entries are read straight from ``block`` (a buffer: the consume queue's mapping or a copy of it) and the
filter's stages and ``find`` are called exactly as the pure-Python reference calls them, in the same order. What
differs is the reading of the records: each accepted record is noted as a span of its commit-log mapping, and at the
end the spans are copied out -- a joined scan copies every run of contiguous records into one ``bytes`` at once
(one copy, no object per record), the others make one ``bytes`` per record. The mappings' buffers are held until
then (a ``MappedFile.close`` meanwhile leaves the unmapping to the garbage collector, as it does for any view).

Any entries are taken here, broken ones too (sizes of zero or less, offsets near the ends of 64 bits), with the
reference's very results; arguments out of the common case (limits beyond 62 bits or not plain ints, a ``keep`` that
is not ``bytes`` or shorter than the block, a block that is no buffer or not whole entries) go to the reference before
any callback runs, which gives the very result or error it always gives. The files ``find`` returns must be what the
commit log's are: offsets in [0, 2**62) and a mapping with the buffer protocol (else OverflowError, TypeError).
``tests/unit/store/test_scan_accel.py`` compares both.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef object _Window = None
cdef object _ref_walk = None

cdef int ENTRY = 20
cdef int32_t BLANK_SIZE = 0x7FFFFFFF
cdef int64_t EXT_ADDRESS_MAX = -2147483649
cdef int64_t OFFSET_LIMIT = 1LL << 62   # limits and file offsets below this: no sum of them overflows


def init_scan(module):
    """Wire in ``sievemq.store.scan``: its ``Window`` class and the reference ``walk_entries``."""
    global _Window, _ref_walk
    _Window = module.Window
    _ref_walk = module.REFERENCE["walk_entries"]


cdef inline int32_t _get32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _get64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_get32(p) << 32) | <uint64_t><uint32_t>_get32(p + 4))


cdef struct Span:
    const char* ptr
    Py_ssize_t length


cdef class _Held:
    """The buffers a walk holds (the consume-queue block, the commit-log files it read) and its record spans."""

    cdef Py_buffer* bufs
    cdef Py_ssize_t nbufs
    cdef Py_ssize_t cap
    cdef Span* spans
    cdef Py_ssize_t nspans

    def __cinit__(self, Py_ssize_t max_spans):
        self.bufs = NULL
        self.nbufs = 0
        self.cap = 0
        self.nspans = 0
        self.spans = <Span*>PyMem_Malloc(max(1, max_spans) * sizeof(Span))
        if self.spans == NULL:
            raise MemoryError()

    cdef Py_buffer* hold(self, object obj) except NULL:
        """A buffer of ``obj``, held until ``release`` (the pointer returned is valid until the next ``hold``)."""
        cdef Py_buffer* grown
        if self.nbufs == self.cap:
            grown = <Py_buffer*>PyMem_Realloc(self.bufs, (self.cap * 2 + 4) * sizeof(Py_buffer))
            if grown == NULL:
                raise MemoryError()
            self.bufs = grown
            self.cap = self.cap * 2 + 4
        PyObject_GetBuffer(obj, &self.bufs[self.nbufs], PyBUF_SIMPLE)
        self.nbufs += 1
        return &self.bufs[self.nbufs - 1]

    cdef void add(self, const char* ptr, Py_ssize_t length, bint merge) noexcept:
        """Note a record's bytes; with ``merge``, one that continues the last span extends it."""
        cdef Span* last
        if merge and self.nspans:
            last = &self.spans[self.nspans - 1]
            if last.ptr + last.length == ptr:
                last.length += length
                return
        self.spans[self.nspans].ptr = ptr
        self.spans[self.nspans].length = length
        self.nspans += 1

    cdef void release(self) noexcept:
        while self.nbufs:
            self.nbufs -= 1
            PyBuffer_Release(&self.bufs[self.nbufs])

    def __dealloc__(self):
        self.release()
        PyMem_Free(self.bufs)
        PyMem_Free(self.spans)


cdef bint _small(object v):
    return type(v) is int and -OFFSET_LIMIT < v < OFFSET_LIMIT


def walk_entries(block, keep, find, log_min, ext_get, match_cq, match_record, limit_msgs, limit_bytes, joined):
    """``walk_entries`` of ``store/scan.py`` (same arguments, same ``Window``)."""
    cdef Py_buffer blk
    if not (_small(log_min) and _small(limit_msgs) and _small(limit_bytes)) or not (keep is None or type(keep) is bytes):
        return _ref_walk(block, keep, find, log_min, ext_get, match_cq, match_record, limit_msgs, limit_bytes, joined)
    try:
        PyObject_GetBuffer(block, &blk, PyBUF_SIMPLE)
    except Exception:  # not a plain buffer: the reference says why
        return _ref_walk(block, keep, find, log_min, ext_get, match_cq, match_record, limit_msgs, limit_bytes, joined)
    try:
        return _walk(<const uint8_t*>blk.buf, blk.len, block, keep, find, log_min, ext_get, match_cq, match_record,
                     limit_msgs, limit_bytes, joined)
    finally:
        PyBuffer_Release(&blk)


cdef object _walk(const uint8_t* p, Py_ssize_t length, object block, object keep, object find, int64_t log_min,
                  object ext_get, object match_cq, object match_record, int64_t limit_msgs, int64_t limit_bytes,
                  object joined):
    cdef Py_ssize_t n = length // ENTRY
    cdef const uint8_t* kp = NULL
    # (a mask shorter than the block stops the reference where it ends)
    if length % ENTRY or (keep is not None and len(keep) < n):
        return _ref_walk(block, keep, find, log_min, ext_get, match_cq, match_record, limit_msgs, limit_bytes, joined)
    if keep is not None:
        kp = <const uint8_t*>PyBytes_AS_STRING(keep)
    return _loop(p, n, kp, find, log_min, ext_get, match_cq, match_record, limit_msgs, limit_bytes, bool(joined))


cdef object _loop(const uint8_t* p, Py_ssize_t n, const uint8_t* kp, object find, int64_t log_min, object ext_get,
                  object match_cq, object match_record, int64_t limit_msgs, int64_t limit_bytes, bint joined):
    cdef _Held held = _Held(min(n, max(1, limit_msgs)))  # at most this many records
    cdef Py_ssize_t i, scanned = n, count = 0, k
    cdef int64_t phy, tags, pos, end, lo = 0, hi = 0, total = 0
    cdef int32_t size
    cdef bint removing = False
    cdef const uint8_t* e
    cdef const char* file_data = NULL  # the mapping of the file read last
    cdef Py_ssize_t file_len = 0
    cdef Py_buffer* buf
    cdef object mf, mm = None, unit, view, ok, records, body, start, stop
    cdef char* out
    for i in range(n):
        if kp != NULL and not kp[i]:
            continue
        e = p + i * ENTRY
        size = _get32(e + 8)
        if size == BLANK_SIZE:
            continue
        phy = _get64(e)
        if phy < log_min:
            removing = True
            continue
        if count and (count >= limit_msgs or total + size > limit_bytes):
            scanned = i
            break
        if match_cq is not None:
            tags = _get64(e + 12)
            if tags > EXT_ADDRESS_MAX:
                if not match_cq(tags, None):
                    continue
            elif ext_get is not None:
                unit = ext_get(tags)
                if unit is not None and not match_cq(unit.tags_code, unit):
                    continue
        if not (lo <= phy and phy <= hi - size):  # the record is not in the file read last
            mf = find(phy)
            if mf is None or size <= 0 or phy - mf.file_from_offset + size > mf.wrote_position:
                removing = True
                continue
            mm, start = mf.mm, mf.file_from_offset
            stop = start + mf.wrote_position
            if not (0 <= start < OFFSET_LIMIT and -OFFSET_LIMIT < stop < OFFSET_LIMIT):
                raise OverflowError(f"commit-log file offsets beyond 62 bits: {start}, {stop}")
            lo, hi = start, stop
            buf = held.hold(mm)  # (a file read again is held again: the spans point into each)
            file_data, file_len = <const char*>buf.buf, buf.len
        pos = phy - lo
        if match_record is not None:
            view = memoryview(mm)
            try:
                ok = match_record(view[pos : pos + size])
            finally:
                view.release()
            if not ok:
                continue
        if file_data == NULL or pos < 0:
            # no file read yet (a size <= 0 "inside" the empty one: the slice fails as the reference's does), or a
            # file that starts after the record (a ``find`` other than the commit log's): Python's slice of it
            buf = held.hold(mm[slice(pos, pos + size)])  # (as Python subscripts: the same error for None)
            held.add(<const char*>buf.buf, buf.len, False)
        else:
            end = min(pos + size, file_len)  # as a slice of the mapping ends
            held.add(file_data + pos, max(0, end - pos), joined)
        total += size
        count += 1
    if joined:
        records = []
        if count:
            end = 0
            for k in range(held.nspans):
                end += held.spans[k].length
            body = PyBytes_FromStringAndSize(NULL, end)
            out = PyBytes_AS_STRING(body)
            for k in range(held.nspans):
                if held.spans[k].length:
                    memcpy(out, held.spans[k].ptr, held.spans[k].length)
                    out += held.spans[k].length
            records.append(body)
    else:
        records = [PyBytes_FromStringAndSize(held.spans[k].ptr, held.spans[k].length) for k in range(held.nspans)]
    held.release()
    return _Window(records, total, scanned, removing, count)
