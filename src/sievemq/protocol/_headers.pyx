# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twins of the header code every request goes through (docs/performance.md): frames split and their JSON
headers decoded (``remoting/command.py``), the edge check of names and numbers (``protocol/header_rules.py``) and the
send header read (``protocol/send_header.py``).

As in ``_codec.pyx``, each twin takes the common case (headers as clients send them) and hands anything else to the
pure-Python reference it twins, which then gives the very result or error it always gives. The modules call the
``init_*`` functions and swap these in unless ``SIEVEMQ_PURE_PYTHON=1`` (``sievemq/protocol/accel.py``);
``tests/unit/protocol/test_headers_accel.py`` and ``tests/unit/remoting/test_frames_accel.py`` compare both.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t


cdef inline int32_t _get32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


# ------------------------------------------------------------------------------------------ remoting frames
cdef object _RemotingCommand = None
cdef object _JSON_TYPE = None
cdef object _ref_split_frames = None
cdef object _ref_decode_header = None
cdef object _ref_stringify = None
cdef tuple _serialize_types = None
cdef object _loads = None
cdef object _obj_new = object.__new__


def init_command(module):
    """Wire in ``sievemq.remoting.command`` (its reference ``split_frames``, ``decode_header`` and the command
    class)."""
    global _RemotingCommand, _JSON_TYPE, _ref_split_frames, _ref_decode_header, _ref_stringify, _serialize_types
    global _loads
    import orjson
    _loads = orjson.loads
    _RemotingCommand = module.RemotingCommand
    _JSON_TYPE = module.SerializeType.JSON
    _serialize_types = (module.SerializeType.JSON, module.SerializeType.ROCKETMQ)
    _ref_split_frames = module.REFERENCE["split_frames"]
    _ref_decode_header = module.decode_header
    _ref_stringify = module.stringify_fields


cdef object _json_command(bytes header, bytes body):
    """The command of a JSON header in its common form (int code/opaque/flag/version, string language and remark,
    string extFields), or None: the reference decodes it."""
    try:
        obj = _loads(header)
    except Exception:
        return None
    if type(obj) is not dict:
        return None
    cdef dict d = <dict>obj
    code = d.get("code")
    opaque = d.get("opaque", 0)
    flag = d.get("flag", 0)
    version = d.get("version", 0)
    if type(code) is not int or type(opaque) is not int or type(flag) is not int or type(version) is not int:
        return None
    language = d.get("language", "JAVA")
    remark = d.get("remark")
    if type(language) is not str or (remark is not None and type(remark) is not str):
        return None
    ext = d.get("extFields")
    if not ext:
        ext = {}
    elif type(ext) is not dict:
        return None
    else:
        for v in (<dict>ext).values():
            if type(v) is not str:
                ext = _ref_stringify(ext)
                break
    cmd = _obj_new(_RemotingCommand)
    cmd.code = code
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.language = language
    cmd.version = version
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = body
    cmd.serialize_type = _JSON_TYPE
    return cmd


def split_frames(bytearray buf, Py_ssize_t pos, Py_ssize_t max_length, list out):
    """Twin of ``command.split_frames``."""
    cdef Py_ssize_t n = len(buf)
    cdef const uint8_t* p = <const uint8_t*>PyByteArray_AS_STRING(buf)
    cdef int32_t length
    cdef uint32_t word, stype, header_len
    cdef Py_ssize_t hstart, bstart, end
    while n - pos >= 8:
        length = _get32(p + pos)
        word = <uint32_t>_get32(p + pos + 4)
        stype = word >> 24
        header_len = word & 0xFFFFFF
        if length < 4 or length > max_length or stype > 1 or header_len > <uint32_t>(length - 4):
            return _ref_split_frames(buf, pos, max_length, out)  # its error
        if n - pos - 4 < length:
            break
        hstart = pos + 8
        bstart = hstart + header_len
        end = pos + 4 + length
        body = PyBytes_FromStringAndSize(<const char*>(p + bstart), end - bstart)
        header = PyBytes_FromStringAndSize(<const char*>(p + hstart), header_len)
        cmd = _json_command(header, body) if stype == 0 else None
        if cmd is None:
            cmd = _ref_decode_header(header, _serialize_types[stype], body)
            p = <const uint8_t*>PyByteArray_AS_STRING(buf)  # (it cannot change buf; re-read all the same)
        out.append(cmd)
        pos = end
    return pos


# ------------------------------------------------------------------------------------------ header checks
cdef object _ref_check_fields = None
cdef tuple _plans_named = None
cdef tuple _plans_v2 = None
cdef object _v2_to_v1 = None


def init_header_rules(module):
    """Wire in ``sievemq.protocol.header_rules`` (its reference ``check_fields`` and its plans)."""
    global _ref_check_fields, _plans_named, _plans_v2, _v2_to_v1
    _ref_check_fields = module.REFERENCE["check_fields"]
    _plans_named = module._PLANS[False]
    _plans_v2 = module._PLANS[True]
    _v2_to_v1 = module.V2_TO_V1


def check_fields(fields, rename=None):
    """Twin of ``header_rules.check_fields``: passes the common case itself, hands anything else (a name not seen
    yet, a number that is not short plain digits in bounds) to the reference, which decides."""
    cdef tuple plans
    if type(fields) is not dict:
        return _ref_check_fields(fields, rename)
    if not rename:
        plans = _plans_named
    elif rename is _v2_to_v1:
        plans = _plans_v2
    else:
        return _ref_check_fields(fields, rename)
    cdef dict names = <dict>plans[0]
    cdef dict ints = <dict>plans[1]
    cdef Py_ssize_t n, i
    cdef int64_t v
    cdef int digit
    cdef str text
    for key, value in (<dict>fields).items():
        if type(value) is not str:
            return _ref_check_fields(fields, rename)
        n = len(<str>value)
        if n == 0:
            continue
        rule = names.get(key)
        if rule is not None:
            if value in (<tuple>rule)[1]:
                continue
            return _ref_check_fields(fields, rename)
        bounds = ints.get(key)
        if bounds is None or value == "null":
            continue
        if n > 18:
            return _ref_check_fields(fields, rename)
        text = <str>value
        v = 0
        for i in range(n):
            digit = <int>text[i] - 48
            if digit < 0 or digit > 9:
                return _ref_check_fields(fields, rename)
            v = v * 10 + digit
        if not ((<tuple>bounds)[1] <= v <= (<tuple>bounds)[2]):
            return _ref_check_fields(fields, rename)
    return None


# ------------------------------------------------------------------------------------------ send headers
cdef object _SendMessageHeader = None
cdef object _ref_parse_send_header = None
cdef dict _send_v2_to_v1 = None
cdef object _auto_topic = None


def init_send_header(module):
    """Wire in ``sievemq.protocol.send_header`` (its reference ``parse_send_header`` and the header class)."""
    global _SendMessageHeader, _ref_parse_send_header, _send_v2_to_v1, _auto_topic
    _SendMessageHeader = module.SendMessageHeader
    _ref_parse_send_header = module.REFERENCE["parse_send_header"]
    _send_v2_to_v1 = module.V2_TO_V1
    _auto_topic = module.AUTO_CREATE_TOPIC_KEY


cdef int _plain_int(object v, int64_t* out):
    """1: ``v`` is an optional minus and at most 18 ASCII digits (its value in ``out``); 0: the absent forms (None,
    "", "null"); -1: anything else (the reference reads it)."""
    if v is None:
        return 0
    if type(v) is not str:
        return -1
    cdef str text = <str>v
    cdef Py_ssize_t n = len(text), i = 0
    cdef int digit
    cdef bint negative = False
    if n == 0 or text == "null":
        return 0
    if text[0] == "-":
        negative = True
        i = 1
    if n - i < 1 or n - i > 18:
        return -1
    cdef int64_t value = 0
    while i < n:
        digit = <int>text[i] - 48
        if digit < 0 or digit > 9:
            return -1
        value = value * 10 + digit
        i += 1
    out[0] = -value if negative else value
    return 1


cdef int _plain_bool(object v):
    """1 / 0 for the usual spellings (absent: 0); -1: anything else (the reference reads it)."""
    if v is None or v == "":
        return 0
    if v == "true" or v == "1":
        return 1
    if v == "false" or v == "0":
        return 0
    return -1


def parse_send_header(fields, v2):
    """Twin of ``send_header.parse_send_header``."""
    if type(fields) is not dict:
        return _ref_parse_send_header(fields, v2)
    cdef dict f
    if v2:
        f = {}
        for k, v in (<dict>fields).items():
            f[_send_v2_to_v1.get(k, k)] = v
    else:
        f = <dict>fields
    cdef int64_t qid = 0, nums = 0, sys_flag = 0, born = 0, flag = 0, reconsume = 0, max_reconsume = 0
    cdef int has_qid = _plain_int(f.get("queueId"), &qid)
    cdef int has_nums = _plain_int(f.get("defaultTopicQueueNums"), &nums)
    cdef int has_sys = _plain_int(f.get("sysFlag"), &sys_flag)
    cdef int has_born = _plain_int(f.get("bornTimestamp"), &born)
    cdef int has_flag = _plain_int(f.get("flag"), &flag)
    cdef int has_reconsume = _plain_int(f.get("reconsumeTimes"), &reconsume)
    cdef int has_max = _plain_int(f.get("maxReconsumeTimes"), &max_reconsume)
    cdef int unit_mode = _plain_bool(f.get("unitMode"))
    cdef int batch = _plain_bool(f.get("batch"))
    group = f.get("producerGroup")
    topic = f.get("topic")
    default_topic = f.get("defaultTopic")
    properties = f.get("properties")
    if (
        has_qid < 0 or has_nums < 0 or has_sys < 0 or has_born < 0 or has_flag < 0 or has_reconsume < 0
        or has_max < 0 or unit_mode < 0 or batch < 0 or type(topic) is not str or not topic
        or (group is not None and type(group) is not str) or (default_topic is not None and type(default_topic) is not str)
        or (properties is not None and type(properties) is not str)
    ):
        return _ref_parse_send_header(fields, v2)
    h = _obj_new(_SendMessageHeader)
    h.producer_group = group if group else ""
    h.topic = topic
    h.default_topic = default_topic if default_topic else _auto_topic
    h.default_topic_queue_nums = nums if has_nums else 4
    h.queue_id = qid if has_qid else -1
    h.sys_flag = sys_flag if has_sys else 0
    h.born_timestamp = born if has_born else 0
    h.flag = flag if has_flag else 0
    h.properties = properties if properties else ""
    h.reconsume_times = reconsume if has_reconsume else 0
    h.unit_mode = unit_mode == 1
    h.max_reconsume_times = max_reconsume if has_max else None
    h.batch = batch == 1
    return h
