#!/usr/bin/env python3
"""An independent gRPC client for the cluster tests (Python's grpcio, with
messages encoded by hand, so nothing of cohort's own code is involved).

  grpc_probe.py health ADDR            -> prints SERVING / NOT_SERVING / ...
  grpc_probe.py services ADDR          -> prints the services reflection lists
  grpc_probe.py join ADDR VERSION REPLICAS
                                       -> prints the status code and details
  grpc_probe.py heartbeats ADDR SECONDS
                                       -> prints "polling" once it polls, then
                                          "RANK TIME" for each heartbeat that
                                          reaches the coordinator in the next
                                          SECONDS
"""
import struct
import sys
import time

import grpc

from wire import field_bytes, field_varint, parse, raw


def health(addr):
    with grpc.insecure_channel(addr) as ch:
        resp = raw(ch, "/grpc.health.v1.Health/Check")(b"", timeout=5)
    status = dict((n, v) for n, _, v in parse(resp)).get(1, 0)
    print({0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING"}.get(status, status))


def services(addr):
    with grpc.insecure_channel(addr) as ch:
        stream = ch.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda x: x, response_deserializer=lambda x: x)
        # ServerReflectionRequest { list_services (7): "" }
        for resp in stream(iter([field_bytes(7, b"")]), timeout=5):
            for num, _, v in parse(resp):
                if num == 6:  # list_services_response
                    for n2, _, svc in parse(v):
                        if n2 == 1:
                            for n3, _, name in parse(svc):
                                if n3 == 1:
                                    print(name.decode())
            break


def join(addr, version, replicas):
    req = (field_varint(1, int(version)) + field_bytes(2, b"probe:1:1") +
           field_bytes(3, b"probe") + field_varint(4, 1) +
           field_varint(5, int(replicas)) + field_bytes(7, b"127.0.0.1"))
    with grpc.insecure_channel(addr) as ch:
        try:
            raw(ch, "/cohort.Coordinator/Join")(req, timeout=5)
            print("OK")
        except grpc.RpcError as e:
            print(e.code().name, e.details())


def heartbeats(addr, seconds):
    """Polls GetStatus every 20 ms for `seconds` and prints "RANK TIME" for
    every heartbeat it sees arrive (unix seconds). A heartbeat arrived
    `heartbeat_age_s` before the answer was made, which is no later than the
    call's end: each time is an upper bound, within one call (a few ms) of
    the truth. Polls closer than the heartbeat interval see every one."""
    last = {}
    end = time.time() + seconds
    with grpc.insecure_channel(addr) as ch:
        status = raw(ch, "/cohort.Coordinator/GetStatus")
        print("polling", flush=True)
        while time.time() < end:
            try:
                resp = status(b"", timeout=2)
            except grpc.RpcError:
                time.sleep(0.02)
                continue
            answered = time.time()
            for num, _, worker in parse(resp):
                if num != 8:  # StatusResponse.workers
                    continue
                w = dict((n, v) for n, _, v in parse(worker))
                rank = w.get(4, 0)
                age = struct.unpack("<d", w[6])[0] if 6 in w else 0.0
                arrived = answered - age
                # The same heartbeat seen again, give or take a call.
                if arrived - last.get(rank, 0) > 0.02:
                    print("%d %.3f" % (rank, arrived), flush=True)
                last[rank] = arrived
            time.sleep(0.02)


def main():
    cmd, addr = sys.argv[1], sys.argv[2]
    if cmd == "health":
        health(addr)
    elif cmd == "services":
        services(addr)
    elif cmd == "join":
        join(addr, sys.argv[3], sys.argv[4])
    elif cmd == "heartbeats":
        heartbeats(addr, float(sys.argv[3]))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
