#!/usr/bin/env python3
"""Unauthenticated 64 MiB calls must not cost the coordinator their size in
memory (tests/auth_flood_test.sh).

  auth_flood.py ADDR PID TOKEN_FILE [--calls 48] [--mib 64] [--rounds 2]
                [--limit-mb 100] [--health-addr ADDR2] [--health-rounds 1]
                [--health-limit-mb 40]
  auth_flood.py --shard SHARD_ADDR SHARD_PID TOKEN_FILE [--calls 48]
                [--mib 64] [--rounds 2] [--limit-mb 20]

Against a coordinator (pid PID) that wants the token in TOKEN_FILE: takes
its VmRSS as the baseline, sends CALLS concurrent KvSet calls of MIB MiB
without the token, ROUNDS times (each call on its own connection, the worst
case for the server: every connection has its own HTTP/2 window), checks
that every one is refused with UNAUTHENTICATED, and samples the
coordinator's VmRSS throughout: its peak and final RSS must stay within
LIMIT_MB of the baseline. Then HEALTH_ROUNDS rounds of as many
server reflection calls of MIB MiB without the token, all refused with
UNAUTHENTICATED, and as many grpc.health.v1.Health/Check calls, on ADDR and
on ADDR2 (the coordinator's --health-listen port): the health service stays
open without the token, so each must be answered SERVING (without its body
being read) or refused. The peak and after RSS of each of these kinds must
stay within HEALTH_LIMIT_MB of the RSS before them. Then an
authenticated KvSet and KvGet of the same size must round-trip. Prints
baseline, peak and after (MB), and exits 1 when a bound is exceeded or a
check fails.

With --shard, ADDR and PID are a parameter-server shard's instead, and
the rounds are of its Pull method, refused without the token before its
request is read, within LIMIT_MB of the shard's RSS before them.

Messages are encoded by hand (grpcio only, none of cohort's code).
"""
import argparse
import sys
import threading
import time

import grpc

from wire import field_bytes, parse, raw

MB = 1e6
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
PULL = "/cohort.ParameterServer/Pull"


def kv_set_request(key, value):
    # KvSetRequest { generation (1) = 0: the store before the job forms,
    # key (2), value (3) }
    return field_bytes(2, key) + field_bytes(3, value)


def kv_get_value(resp):
    """KvGetResponse { found (1), value (2) } -> value or None."""
    fields = dict((n, v) for n, _, v in parse(resp))
    return fields.get(2, b"") if fields.get(1, 0) else None


def rss_kb(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no %s for pid %d" % (field, pid))


class Sampler(threading.Thread):
    """The coordinator's largest VmRSS while it runs (every 5 ms)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.peak_kb = max(self.peak_kb, rss_kb(self.pid))
            time.sleep(0.005)


def health_answer(resp):
    """HealthCheckResponse { status (1) } -> "SERVING", ..."""
    status = dict((n, v) for n, _, v in parse(resp)).get(1, 0)
    return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING"}.get(status,
                                                            str(status))


def flood(addr, calls, request, method="/cohort.Coordinator/KvSet",
          expected="UNAUTHENTICATED"):
    """CALLS concurrent unauthenticated calls; {outcome: count}, an outcome
    being a response's health status or an error's code name (with its
    message unless it is EXPECTED)."""
    # A private subchannel pool: every channel its own connection.
    channels = [grpc.insecure_channel(
        addr, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(calls)]
    try:
        if method in (REFLECTION, PULL):  # a stream of responses
            if method == REFLECTION:  # and of requests
                start = lambda ch: ch.stream_stream(
                    method, request_serializer=lambda x: x,
                    response_deserializer=lambda x: x)(iter([request]),
                                                       timeout=60)
            else:
                start = lambda ch: ch.unary_stream(
                    method, request_serializer=lambda x: x,
                    response_deserializer=lambda x: x)(request, timeout=60)
            futures = [start(ch) for ch in channels]
            results = [lambda f=f: b"".join(f) for f in futures]
        else:
            futures = [raw(ch, method).future(request, timeout=60)
                       for ch in channels]
            results = [f.result for f in futures]
        codes = {}
        for result in results:
            try:
                code = "OK " + health_answer(result())
            except grpc.RpcError as e:
                code = e.code().name
                if code != expected:
                    code += " " + (e.details() or "")
            codes[code] = codes.get(code, 0) + 1
        return codes
    finally:
        for ch in channels:
            ch.close()


def settle(pid, seconds):
    """VmRSS (kB) after SECONDS, the smallest of a few samples."""
    time.sleep(seconds)
    return min(rss_kb(pid) for _ in range(5) if time.sleep(0.05) is None)


def authenticated_round_trip(addr, token, mib):
    md = [("authorization", "Bearer " + token)]
    value = bytes(range(256)) * (mib * 4096)
    opts = [("grpc.max_receive_message_length", (mib + 1) << 20),
            ("grpc.max_send_message_length", (mib + 1) << 20)]
    with grpc.insecure_channel(addr, options=opts) as ch:
        t0 = time.monotonic()
        raw(ch, "/cohort.Coordinator/KvSet")(
            kv_set_request(b"flood/big", value), timeout=60, metadata=md)
        t1 = time.monotonic()
        resp = raw(ch, "/cohort.Coordinator/KvGet")(
            field_bytes(2, b"flood/big"), timeout=60, metadata=md)
        t2 = time.monotonic()
    got = kv_get_value(resp)
    return got == value, t1 - t0, t2 - t1


def rounds(args, count, addr, request, method, expected, accept):
    """COUNT floods of one kind; the number of failed checks."""
    failures = 0
    for r in range(1, count + 1):
        t0 = time.monotonic()
        codes = flood(addr, args.calls, request, method, expected)
        took = time.monotonic() - t0
        after = settle(args.pid, 1.0)
        print("round %d: %d calls of %d MiB to %s without the token in "
              "%.1fs: %s; after: %.0f MB" % (r, args.calls, args.mib, method,
                                             took, codes, after * 1e3 / MB))
        if not all(accept(code) for code in codes):
            print("FAIL: every call must be %s" % expected)
            failures += 1
    return failures


def measured(args, what, limit_mb, run):
    """Runs RUN (a function returning failures) while sampling the RSS;
    fails when the peak or the RSS after exceeds the RSS before by more
    than LIMIT_MB."""
    before = settle(args.pid, 0.5)
    sampler = Sampler(args.pid)
    sampler.start()
    failures = run()
    sampler.stop.set()
    sampler.join()
    after = settle(args.pid, 1.0)
    peak = max(sampler.peak_kb, after)
    grown, peaked = (after - before) * 1e3 / MB, (peak - before) * 1e3 / MB
    print("%s: server RSS before %.0f MB, peak %.0f MB (+%.0f), after "
          "%.0f MB (+%.0f; limit +%.0f MB)" % (
              what, before * 1e3 / MB, peak * 1e3 / MB, peaked,
              after * 1e3 / MB, grown, limit_mb))
    if grown > limit_mb or peaked > limit_mb:
        print("FAIL: %s without the token took the server more than "
              "%.0f MB over its RSS before them" % (what, limit_mb))
        failures += 1
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("pid", type=int)
    p.add_argument("token_file")
    p.add_argument("--calls", type=int, default=48)
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--limit-mb", type=float, default=100)
    p.add_argument("--health-addr")
    p.add_argument("--health-rounds", type=int, default=1)
    p.add_argument("--health-limit-mb", type=float, default=40)
    p.add_argument("--shard", action="store_true")
    args = p.parse_args()
    token = open(args.token_file).read().strip()
    payload = b"\x5a" * (args.mib << 20)
    if args.shard:
        # PullRequest { worker_id (1) }: refused before it is read.
        sys.exit(1 if measured(args, "Pull", args.limit_mb, lambda: rounds(
            args, args.rounds, args.addr, field_bytes(1, payload), PULL,
            "UNAUTHENTICATED", lambda code: code == "UNAUTHENTICATED"))
            else 0)

    refused = lambda code: code == "UNAUTHENTICATED"
    failures = measured(args, "KvSet", args.limit_mb, lambda: rounds(
        args, args.rounds, args.addr, kv_set_request(b"flood/x", payload),
        "/cohort.Coordinator/KvSet", "UNAUTHENTICATED", refused))
    # ServerReflectionRequest { host (1) }: gRPC's reflection service, which
    # reads its requests whole, must refuse them first.
    failures += measured(args, "reflection", args.health_limit_mb,
                         lambda: rounds(args, args.health_rounds, args.addr,
                                        field_bytes(1, payload), REFLECTION,
                                        "UNAUTHENTICATED", refused))
    # HealthCheckRequest { service (1) }: a name of MIB MiB.
    check = field_bytes(1, payload)
    served = lambda code: code in ("OK SERVING", "RESOURCE_EXHAUSTED")
    for what, addr in (("health checks", args.addr),
                       ("--health-listen checks", args.health_addr)):
        if addr:
            failures += measured(args, what, args.health_limit_mb,
                                 lambda: rounds(
                                     args, args.health_rounds, addr, check,
                                     "/grpc.health.v1.Health/Check",
                                     "RESOURCE_EXHAUSTED", served))

    ok, set_s, get_s = authenticated_round_trip(args.addr, token, args.mib)
    print("authenticated %d MiB KvSet %.2fs, KvGet %.2fs: %s" %
          (args.mib, set_s, get_s, "value intact" if ok else "VALUE DIFFERS"))
    if not ok:
        failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
