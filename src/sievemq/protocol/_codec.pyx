# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twins of the hot codec functions of ``message.py`` and ``batch.py`` (docs/performance.md).

Each function here takes the common case (4.x records with IPv4 hosts, well-formed input) and hands anything
else -- IPv6 hosts, MAGIC_V2, a field out of range, malformed bytes -- to the pure-Python reference it twins,
which then produces the very result or error the reference always gives. ``tests/unit/protocol/test_accel.py`` runs both
on generated input and compares results byte for byte. ``init`` wires the reference module in; ``message.py`` and
``batch.py`` call it and swap these functions in unless ``SIEVEMQ_PURE_PYTHON=1`` (``sievemq/protocol/accel.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL

import zlib

cdef object _crc32 = zlib.crc32

cdef object _MessageExt = None
cdef object _BatchEntry = None
cdef object _ref_encode_record = None
cdef object _ref_decode_record = None
cdef object _ref_properties_to_string = None
cdef object _ref_decode_batch = None
cdef object _ref_batch_messages = None
cdef object _ref_encode_batch = None
cdef object _ref_index_put = None
cdef object _ref_encode_run = None
cdef object _ref_offset_msg_ids = None
cdef object _ref_ip_to_bytes = None
cdef dict _topic_parts = None   # the reference's caches: shared, so both see the same names
cdef dict _topic_cache = None
cdef dict _host_raw = None
cdef dict _ip4_by_int = {}

cdef uint32_t MAGIC_V1 = 0xDAA320A7
cdef uint32_t BLANK_MAGIC = 0xCBD43194
cdef int FIXED = 88          # the fixed part of a record with IPv4 hosts
cdef int MIN_RECORD = 91     # fixed part + topic length byte + properties length


def init_message(module):
    """Wire in ``sievemq.protocol.message``: its reference functions (``REFERENCE``, ``decode_record``), the
    message class and the name caches."""
    global _MessageExt, _ref_encode_record, _ref_decode_record, _ref_properties_to_string
    global _topic_parts, _topic_cache, _host_raw, _ref_encode_run, _ref_offset_msg_ids, _ref_ip_to_bytes
    _MessageExt = module.MessageExt
    _ref_encode_record = module.REFERENCE["encode_record"]
    _ref_decode_record = module.decode_record
    _ref_properties_to_string = module.REFERENCE["properties_to_string"]
    _ref_encode_run = module.REFERENCE["encode_run"]
    _ref_offset_msg_ids = module.REFERENCE["offset_msg_ids"]
    _ref_ip_to_bytes = module.ip_to_bytes
    _topic_parts = module._topic_parts
    _topic_cache = module._topic_cache
    _host_raw = module._host_raw


def init_batch(module):
    """Wire in ``sievemq.protocol.batch`` (its reference ``decode_batch`` and ``BatchEntry``)."""
    global _BatchEntry, _ref_decode_batch, _ref_batch_messages, _ref_encode_batch
    _BatchEntry = module.BatchEntry
    _ref_decode_batch = module.REFERENCE["decode_batch"]
    _ref_batch_messages = module.REFERENCE["batch_messages"]
    _ref_encode_batch = module.REFERENCE["encode_batch"]


# ------------------------------------------------------------------------------------------ big-endian helpers
cdef inline void _put32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline void _put64(char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)


cdef inline int32_t _get32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _get64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_get32(p) << 32) | <uint64_t><uint32_t>_get32(p + 4))


cdef inline bint _fits32(object v):
    """An int the reference's ``struct`` 'i' field takes (bool included, as struct takes it)."""
    return isinstance(v, int) and -2147483648 <= v <= 2147483647


cdef inline bint _fits64(object v):
    return isinstance(v, int) and -9223372036854775808 <= v <= 9223372036854775807


# ------------------------------------------------------------------------------------------ properties
def string_to_properties(s):
    """Twin of ``message.string_to_properties``."""
    cdef dict result = {}
    cdef str seg
    cdef Py_ssize_t i
    if not s:
        return result
    for seg in s.split("\x02"):
        i = seg.find("\x01")
        if i > 0 and i < len(seg) - 1:  # a key and a value, both non-empty
            result[seg[:i]] = seg[i + 1:]
    return result


cdef dict _props_from_utf8(const uint8_t* p, Py_ssize_t n):
    """``string_to_properties(p[:n].decode("utf-8", "replace"))`` without the whole string: 0x01 and 0x02 never
    occur inside a UTF-8 sequence and end any broken one, so splitting the bytes first gives the same pieces."""
    cdef dict result = {}
    cdef const uint8_t* end = p + n
    cdef const uint8_t* seg_end
    cdef const uint8_t* sep
    while p < end:
        seg_end = <const uint8_t*>memchr(p, 2, end - p)
        if seg_end == NULL:
            seg_end = end
        sep = <const uint8_t*>memchr(p, 1, seg_end - p)
        if sep != NULL and sep > p and sep + 1 < seg_end:
            result[PyUnicode_DecodeUTF8(<const char*>p, sep - p, "replace")] = PyUnicode_DecodeUTF8(
                <const char*>(sep + 1), seg_end - sep - 1, "replace")
        p = seg_end + 1
    return result


def props_from_utf8(raw):
    """``string_to_properties(raw.decode("utf-8", "replace"))`` straight from the bytes (for the tests)."""
    cdef const uint8_t[:] view = raw
    if view.shape[0] == 0:
        return {}
    return _props_from_utf8(&view[0], view.shape[0])


cdef Py_ssize_t _props_size(dict props) except -2:
    """The UTF-8 size of ``properties_to_string(props)``, or -1 when the reference must do it (a value that is
    not exactly a str, a separator where none may be, or a character UTF-8 cannot encode)."""
    cdef Py_ssize_t total = 0, kn, vn
    cdef const char* kp
    cdef const char* vp
    for k, v in props.items():
        if type(k) is not str or type(v) is not str:
            return -1
        try:
            kp = PyUnicode_AsUTF8AndSize(k, &kn)
            vp = PyUnicode_AsUTF8AndSize(v, &vn)
        except UnicodeEncodeError:
            return -1
        if memchr(kp, 1, kn) != NULL or memchr(kp, 2, kn) != NULL or memchr(vp, 2, vn) != NULL:
            return -1
        total += kn + vn + 2
    return total - 1 if total else 0


cdef void _props_write(dict props, char* out):
    """Write what ``_props_size`` measured (it checked every key and value)."""
    cdef Py_ssize_t kn, vn
    cdef const char* kp
    cdef const char* vp
    cdef bint first = True
    for k, v in props.items():
        kp = PyUnicode_AsUTF8AndSize(k, &kn)
        vp = PyUnicode_AsUTF8AndSize(v, &vn)
        if not first:
            out[0] = 2
            out += 1
        first = False
        memcpy(out, kp, kn)
        out[kn] = 1
        memcpy(out + kn + 1, vp, vn)
        out += kn + 1 + vn


def properties_to_string(props):
    """Twin of ``message.properties_to_string``."""
    cdef list parts = []
    if type(props) is not dict:
        return _ref_properties_to_string(props)
    for k, v in (<dict>props).items():
        if type(k) is not str or type(v) is not str or "\x01" in k or "\x02" in k or "\x02" in v:
            return _ref_properties_to_string(props)  # formats other types, or raises for separators
        parts.append(k + "\x01" + v)
    return "\x02".join(parts)


# ------------------------------------------------------------------------------------------ records
def encode_record(msg):
    """Twin of ``message.encode_record``."""
    if type(msg) is not _MessageExt:
        return _ref_encode_record(msg)
    sys_flag = msg.sys_flag
    body = msg.body
    topic_part = _topic_parts.get(msg.topic)
    born = msg.born_host
    store = msg.store_host
    if (
        type(body) is not bytes or topic_part is None or not _fits32(sys_flag) or sys_flag & 0x30
        or type(born) is not tuple or len(born) != 2 or type(store) is not tuple or len(store) != 2
    ):
        return _ref_encode_record(msg)
    born_ip = _host_raw.get(born[0])
    store_ip = _host_raw.get(store[0])
    if born_ip is None or store_ip is None or len(born_ip) != 4 or len(store_ip) != 4:
        return _ref_encode_record(msg)
    qid, flag, qoff, phy = msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset
    born_ts, store_ts = msg.born_timestamp, msg.store_timestamp
    reconsume, prepared = msg.reconsume_times, msg.prepared_transaction_offset
    born_port, store_port = born[1], store[1]
    if not (
        _fits32(qid) and _fits32(flag) and _fits64(qoff) and _fits64(phy) and _fits64(born_ts)
        and _fits32(born_port) and _fits64(store_ts) and _fits32(store_port) and _fits32(reconsume)
        and _fits64(prepared)
    ):
        return _ref_encode_record(msg)
    props = msg.properties
    if type(props) is not dict:
        return _ref_encode_record(msg)
    cdef Py_ssize_t plen = _props_size(<dict>props)
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(body)
    cdef Py_ssize_t tlen = PyBytes_GET_SIZE(topic_part)
    if plen < 0 or plen > 32767 or blen > 2147483647 - 1000:
        return _ref_encode_record(msg)
    cdef uint32_t crc = <uint32_t>(_crc32(body) & 0x7FFFFFFF)
    cdef Py_ssize_t total = FIXED + blen + tlen + 2 + plen
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* p = PyBytes_AS_STRING(out)
    _put32(p, <uint32_t>total)
    _put32(p + 4, MAGIC_V1)
    _put32(p + 8, crc)
    _put32(p + 12, <uint32_t><int32_t>qid)
    _put32(p + 16, <uint32_t><int32_t>flag)
    _put64(p + 20, <uint64_t><int64_t>qoff)
    _put64(p + 28, <uint64_t><int64_t>phy)
    _put32(p + 36, <uint32_t><int32_t>sys_flag)
    _put64(p + 40, <uint64_t><int64_t>born_ts)
    memcpy(p + 48, PyBytes_AS_STRING(born_ip), 4)
    _put32(p + 52, <uint32_t><int32_t>born_port)
    _put64(p + 56, <uint64_t><int64_t>store_ts)
    memcpy(p + 64, PyBytes_AS_STRING(store_ip), 4)
    _put32(p + 68, <uint32_t><int32_t>store_port)
    _put32(p + 72, <uint32_t><int32_t>reconsume)
    _put64(p + 76, <uint64_t><int64_t>prepared)
    _put32(p + 84, <uint32_t>blen)
    memcpy(p + FIXED, PyBytes_AS_STRING(body), blen)
    memcpy(p + FIXED + blen, PyBytes_AS_STRING(topic_part), tlen)
    p += FIXED + blen + tlen
    p[0] = <char>(plen >> 8)
    p[1] = <char>plen
    _props_write(<dict>props, p + 2)
    msg.body_crc = crc
    msg.store_size = total
    return out


def encode_run(list msgs, queue_offset, store_timestamp, store_host, phy, Py_ssize_t limit):
    """Twin of ``message.encode_run``."""
    if not (_fits64(queue_offset) and _fits64(store_timestamp) and _fits64(phy)) or phy < 0 or queue_offset < 0:
        return _ref_encode_run(msgs, queue_offset, store_timestamp, store_host, phy, limit)
    cdef int64_t qoff = queue_offset
    cdef int64_t p = phy
    cdef int64_t t
    cdef Py_ssize_t size
    cdef list records = []
    for m in msgs:
        sys_flag = m.sys_flag if type(m) is _MessageExt else None
        if type(sys_flag) is not int or p > 0x3FFFFFFFFFFFFFFF or qoff > 0x3FFFFFFFFFFFFFFF:
            return _ref_encode_run(msgs, queue_offset, store_timestamp, store_host, phy, limit)
        t = (<int64_t>(sys_flag & 0xC))
        if t != 0x4 and t != 0xC:
            m.queue_offset = qoff
            qoff += 1
        else:
            m.queue_offset = 0
        m.store_timestamp = store_timestamp
        m.store_host = store_host
        m.commit_log_offset = p
        rec = encode_record(m)
        size = len(rec)
        if size > limit:
            raise ValueError(f"record of {size} bytes does not fit a commit-log segment")
        records.append(rec)
        p += size
    return records, qoff, p


cdef char* _HEX = b"0123456789ABCDEF"


def offset_msg_ids(host, port, list msgs):
    """Twin of ``message.offset_msg_ids``."""
    if type(host) is not str or type(port) is not int or not (-2147483648 <= port <= 2147483647):
        return _ref_offset_msg_ids(host, port, msgs)
    try:
        ip = _ref_ip_to_bytes(host)
    except ValueError:
        return _ref_offset_msg_ids(host, port, msgs)
    if len(ip) != 4:
        return _ref_offset_msg_ids(host, port, msgs)
    cdef char raw[16]
    cdef char text[32]
    cdef int i
    cdef uint8_t b
    memcpy(raw, PyBytes_AS_STRING(ip), 4)
    _put32(raw + 4, <uint32_t><int32_t>port)
    cdef list out = []
    for m in msgs:
        phy = m.commit_log_offset
        if type(phy) is not int or not _fits64(phy):
            return _ref_offset_msg_ids(host, port, msgs)
        _put64(raw + 8, <uint64_t><int64_t>phy)
        for i in range(16):
            b = <uint8_t>raw[i]
            text[2 * i] = _HEX[b >> 4]
            text[2 * i + 1] = _HEX[b & 15]
        out.append(PyUnicode_DecodeASCII(text, 32, NULL))
    return out


cdef inline str _ip4(uint32_t raw):
    s = _ip4_by_int.get(raw)
    if s is None:
        if len(_ip4_by_int) > 4096:
            _ip4_by_int.clear()
        s = _ip4_by_int[raw] = f"{raw >> 24}.{(raw >> 16) & 0xFF}.{(raw >> 8) & 0xFF}.{raw & 0xFF}"
    return <str>s


cdef inline str _topic(const uint8_t* p, Py_ssize_t n):
    raw = PyBytes_FromStringAndSize(<const char*>p, n)
    s = _topic_cache.get(raw)
    if s is None:
        if len(_topic_cache) > 4096:
            _topic_cache.clear()
        s = _topic_cache[raw] = raw.decode("utf-8", "replace")
    return <str>s


def decode_records(buf, *, read_body=True):
    """Twin of ``message.decode_records``."""
    cdef const uint8_t[:] view = buf
    cdef const uint8_t* b = &view[0] if view.shape[0] else NULL
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t pos = 0, end, p, props_pos
    cdef int32_t total, body_len, sys_flag
    cdef int topic_len, props_len
    cdef bint want_body = bool(read_body)
    cdef list out = []
    new = _MessageExt
    while pos < n:
        if n - pos >= MIN_RECORD:
            total = _get32(b + pos)
            body_len = _get32(b + pos + 84)
            sys_flag = _get32(b + pos + 36)
            end = pos + total
            p = pos + FIXED + body_len
            if (
                <uint32_t>_get32(b + pos + 4) == MAGIC_V1 and not (sys_flag & 0x30) and total >= MIN_RECORD
                and end <= n and body_len >= 0 and p < end
            ):
                topic_len = b[p]
                props_pos = p + 1 + topic_len
                if topic_len <= 127 and props_pos + 2 <= end:
                    props_len = (b[props_pos] << 8) | b[props_pos + 1]
                    if props_len < 0x8000 and props_pos + 2 + props_len == end:
                        topic = _topic(b + p + 1, topic_len)
                        props = _props_from_utf8(b + props_pos + 2, props_len)
                        body = (PyBytes_FromStringAndSize(<const char*>(b + pos + FIXED), body_len)
                                if want_body and body_len else b"")
                        out.append(new(
                            topic, body, _get32(b + pos + 16), props, _get32(b + pos + 12), _get64(b + pos + 20),
                            _get64(b + pos + 28), sys_flag, _get64(b + pos + 40),
                            (_ip4(<uint32_t>_get32(b + pos + 48)), _get32(b + pos + 52)), _get64(b + pos + 56),
                            (_ip4(<uint32_t>_get32(b + pos + 64)), _get32(b + pos + 68)), _get32(b + pos + 72),
                            _get64(b + pos + 76), _get32(b + pos + 8), total,
                        ))
                        pos = end
                        continue
        if pos + 8 <= n and <uint32_t>_get32(b + pos + 4) == BLANK_MAGIC:
            break
        msg, pos = _ref_decode_record(buf, pos, read_body=read_body)
        out.append(msg)
    return out


# ------------------------------------------------------------------------------------------ batch bodies
def decode_batch(body):
    """Twin of ``batch.decode_batch``."""
    cdef const uint8_t[:] view = body
    cdef const uint8_t* b = &view[0] if view.shape[0] else NULL
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t pos = 0
    cdef int32_t flag, body_len
    cdef int16_t props_len
    cdef list out = []
    entry = _BatchEntry
    while pos < n:
        if pos + 20 > n:
            return _ref_decode_batch(body)  # the reference names the broken entry
        flag = _get32(b + pos + 12)
        body_len = _get32(b + pos + 16)
        pos += 20
        if body_len < 0 or pos + body_len + 2 > n:
            return _ref_decode_batch(body)
        entry_body = PyBytes_FromStringAndSize(<const char*>(b + pos), body_len)
        pos += body_len
        props_len = <int16_t>((b[pos] << 8) | b[pos + 1])
        pos += 2
        if props_len < 0 or pos + props_len > n:
            return _ref_decode_batch(body)
        props = _props_from_utf8(b + pos, props_len)
        pos += props_len
        out.append(entry(flag, entry_body, props))
    return out


def batch_messages(body, topic, queue_id, sys_flag, born_timestamp, born_host, store_host, reconsume_times,
                   dict base, Py_ssize_t max_body):
    """Twin of ``batch.batch_messages``."""
    cdef const uint8_t[:] view = body
    cdef const uint8_t* b = &view[0] if view.shape[0] else NULL
    cdef Py_ssize_t n = view.shape[0]
    cdef Py_ssize_t pos = 0
    cdef int32_t body_len
    cdef int16_t props_len
    cdef dict props
    cdef list out = []
    new = _MessageExt
    if _MessageExt is None:
        return _ref_batch_messages(body, topic, queue_id, sys_flag, born_timestamp, born_host, store_host,
                                   reconsume_times, base, max_body)
    while pos < n:
        if pos + 20 > n:
            return None
        flag = _get32(b + pos + 12)
        body_len = _get32(b + pos + 16)
        pos += 20
        if body_len < 0 or pos + body_len + 2 > n:
            return None
        entry_body = PyBytes_FromStringAndSize(<const char*>(b + pos), body_len)
        pos += body_len
        props_len = <int16_t>((b[pos] << 8) | b[pos + 1])
        pos += 2
        if props_len < 0 or pos + props_len > n:
            return None
        props = _props_from_utf8(b + pos, props_len)
        pos += props_len
        if "DELAY" in props or body_len > max_body:
            return None
        props.update(base)
        out.append(new(topic, entry_body, flag, props, queue_id, 0, 0, sys_flag, born_timestamp, born_host, 0,
                       store_host, reconsume_times))
    return out or None


def encode_batch(entries):
    """Twin of ``batch.encode_batch``."""
    cdef list items = list(entries)
    cdef list sizes = []
    cdef Py_ssize_t total = 0, plen, blen
    cdef char* p
    for e in items:
        if type(e) is not _BatchEntry:
            return _ref_encode_batch(items)
        body, props, flag = e.body, e.properties, e.flag
        if type(body) is not bytes or type(props) is not dict or not _fits32(flag):
            return _ref_encode_batch(items)
        plen = _props_size(<dict>props)
        if plen < 0 or plen > 32767:
            return _ref_encode_batch(items)  # formats other values, or raises
        blen = PyBytes_GET_SIZE(body)
        if 22 + blen + plen > 2147483647:
            return _ref_encode_batch(items)
        sizes.append(plen)
        total += 22 + blen + plen
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    for e, size in zip(items, sizes):
        body = e.body
        plen = size
        blen = PyBytes_GET_SIZE(body)
        _put32(p, <uint32_t>(22 + blen + plen))
        _put32(p + 4, 0)
        _put32(p + 8, 0)
        _put32(p + 12, <uint32_t><int32_t>e.flag)
        _put32(p + 16, <uint32_t>blen)
        memcpy(p + 20, PyBytes_AS_STRING(body), blen)
        p += 20 + blen
        p[0] = <char>(plen >> 8)
        p[1] = <char>plen
        _props_write(<dict>e.properties, p + 2)
        p += 2 + plen
    return out


# ------------------------------------------------------------------------------------------ index entries
def init_index(module):
    """Wire in ``sievemq.store.index_file`` (its reference ``index_put``)."""
    global _ref_index_put
    _ref_index_put = module.REFERENCE["index_put"]


def index_put(mm, Py_ssize_t slots, Py_ssize_t count, topic, keys, phys, tss, Py_ssize_t start, Py_ssize_t n):
    """Twin of ``index_file.index_put``."""
    if (
        type(topic) is not str or type(keys) is not list or type(phys) is not list or type(tss) is not list
        or slots <= 0 or count < 0 or n < 0 or start < 0 or start + n > min(len(keys), len(phys), len(tss))
    ):
        return _ref_index_put(mm, slots, count, topic, keys, phys, tss, start, n)
    cdef list hashes = []
    cdef Py_ssize_t i
    prefix = topic + "#"
    try:  # everything checked before a byte is written: anything odd, and the reference does it all
        for i in range(start, start + n):
            key, phy, ts = keys[i], phys[i], tss[i]
            if type(key) is not str or not _fits64(phy) or not _fits64(ts):
                return _ref_index_put(mm, slots, count, topic, keys, phys, tss, start, n)
            hashes.append(_crc32((prefix + key).encode("utf-8")))
    except UnicodeEncodeError:
        return _ref_index_put(mm, slots, count, topic, keys, phys, tss, start, n)
    cdef unsigned char[:] view = mm
    cdef Py_ssize_t base = 48 + slots * 4
    if base + (count + n) * 24 > view.shape[0]:
        return _ref_index_put(mm, slots, count, topic, keys, phys, tss, start, n)
    cdef char* b = <char*>&view[0]
    cdef Py_ssize_t slot_pos, pos, j = 0
    cdef uint32_t h
    cdef int32_t prev
    for i in range(start, start + n):
        h = <uint32_t>hashes[j]
        j += 1
        slot_pos = 48 + (h % <uint32_t>slots) * 4
        prev = _get32(<const uint8_t*>(b + slot_pos))
        if prev < 0 or prev > count:
            prev = 0
        count += 1
        pos = base + (count - 1) * 24
        _put32(b + pos, h)
        _put64(b + pos + 4, <uint64_t><int64_t>phys[i])
        _put64(b + pos + 12, <uint64_t><int64_t>tss[i])
        _put32(b + pos + 20, <uint32_t>prev)
        _put32(b + slot_pos, <uint32_t><int32_t>count)
    return count
