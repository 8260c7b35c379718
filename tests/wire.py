"""Protocol Buffers wire format by hand, for the tests' independent gRPC
clients (grpc_probe.py, auth_flood.py, blocking_flood.py): they use grpcio
and nothing of cohort's own code, so messages are encoded here."""


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    return varint((num << 3) | 2) + varint(len(data)) + data


def parse(buf):
    """Yields (field number, wire type, value) of one message level."""
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 1:  # fixed64 (double): the 8 bytes
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:  # fixed32 (float): the 4 bytes
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unexpected wire type %d" % wt)
        yield num, wt, v


def raw(channel, method):
    """A unary method of `channel` that takes and returns bytes."""
    return channel.unary_unary(method, request_serializer=lambda x: x,
                               response_deserializer=lambda x: x)
