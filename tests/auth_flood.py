#!/usr/bin/env python3
"""Issue 16, defect 3: unauthenticated 64 MiB calls must not cost the
coordinator their size in memory (tests/auth_flood_test.sh).

  auth_flood.py ADDR PID TOKEN_FILE [--calls 48] [--mib 64] [--rounds 2]
                [--limit-mb 100]

Against a coordinator (pid PID) that wants the token in TOKEN_FILE: takes
its VmRSS as the baseline, sends CALLS concurrent KvSet calls of MIB MiB
without the token, ROUNDS times (each call on its own connection, the worst
case for the server: every connection has its own HTTP/2 window), checks
that every one is refused with UNAUTHENTICATED, and samples the
coordinator's VmRSS throughout. Then an authenticated KvSet and KvGet of the
same size must round-trip. Prints baseline, peak and after (MB), and exits
1 when after - baseline exceeds LIMIT_MB or a check fails.

Messages are encoded by hand (grpcio only, none of cohort's code).
"""
import argparse
import sys
import threading
import time

import grpc

from wire import field_bytes, parse, raw

MB = 1e6


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


def flood(addr, calls, request):
    """CALLS concurrent unauthenticated KvSets; {code name: count}."""
    # A private subchannel pool: every channel its own connection.
    channels = [grpc.insecure_channel(
        addr, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(calls)]
    try:
        futures = [raw(ch, "/cohort.Coordinator/KvSet").future(
            request, timeout=60) for ch in channels]
        codes = {}
        for f in futures:
            try:
                f.result()
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
                if code != "UNAUTHENTICATED":
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("pid", type=int)
    p.add_argument("token_file")
    p.add_argument("--calls", type=int, default=48)
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--limit-mb", type=float, default=100)
    args = p.parse_args()
    token = open(args.token_file).read().strip()
    failures = 0

    baseline = settle(args.pid, 0.5)
    print("baseline: %.0f MB" % (baseline * 1e3 / MB))
    request = kv_set_request(b"flood/x", b"\x5a" * (args.mib << 20))
    sampler = Sampler(args.pid)
    sampler.start()
    after = baseline
    for r in range(1, args.rounds + 1):
        t0 = time.monotonic()
        codes = flood(args.addr, args.calls, request)
        took = time.monotonic() - t0
        after = settle(args.pid, 1.0)
        print("round %d: %d calls of %d MiB without the token in %.1fs: %s; "
              "after: %.0f MB" % (r, args.calls, args.mib, took, codes,
                                  after * 1e3 / MB))
        if codes != {"UNAUTHENTICATED": args.calls}:
            print("FAIL: every call must be UNAUTHENTICATED")
            failures += 1
    sampler.stop.set()
    sampler.join()
    hwm = rss_kb(args.pid, "VmHWM")
    grown = (after - baseline) * 1e3 / MB
    print("coordinator RSS: baseline %.0f MB, peak %.0f MB (VmHWM %.0f MB), "
          "after %.0f MB (+%.0f MB; limit +%.0f MB)" %
          (baseline * 1e3 / MB, sampler.peak_kb * 1e3 / MB, hwm * 1e3 / MB,
           after * 1e3 / MB, grown, args.limit_mb))
    if grown > args.limit_mb:
        print("FAIL: the coordinator kept %.0f MB after the unauthenticated "
              "calls (more than %.0f MB over its baseline)" %
              (grown, args.limit_mb))
        failures += 1

    ok, set_s, get_s = authenticated_round_trip(args.addr, token, args.mib)
    print("authenticated %d MiB KvSet %.2fs, KvGet %.2fs: %s" %
          (args.mib, set_s, get_s, "value intact" if ok else "VALUE DIFFERS"))
    if not ok:
        failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
