#!/usr/bin/env python3
"""A flood of blocking calls must not starve heartbeats, nor keep a job's
workers from joining (tests/blocking_flood_test.sh).

  blocking_flood.py ADDR [--calls 8000] [--channels 4] [--seconds 30]
                    [--token-file F] [--until-done]

Keeps CALLS KvWait calls outstanding at the coordinator at ADDR, spread
over CHANNELS connections, each waiting for a key that never appears. A
call that ends is sent again: at once when it named a generation that is
over (the job formed or regrouped: the answer names the current one), after
a second when it was refused. Meanwhile a separate connection polls
GetStatus every 200 ms and records the largest heartbeat age of each
worker. Runs SECONDS, or with --until-done until the job has ended or the
coordinator is gone (at most SECONDS). Prints one summary line of the form

  flood: calls 8000 ... refused RESOURCE_EXHAUSTED 7744 (at the total
  5120) ... heartbeat age max 0.6s (rank 0 0.6s, rank 1 0.5s) status polls
  120 ...

and, once, the first RESOURCE_EXHAUSTED message seen. Messages are encoded
by hand (grpcio only, none of cohort's code).
"""
import argparse
import asyncio
import os
import re
import struct
import threading
import time

import grpc
import grpc.aio

from wire import field_bytes, field_varint, parse

STATES = {0: "FORMING", 1: "RUNNING", 2: "SUCCEEDED", 3: "FAILED", 4: "STOPPED"}


def kv_wait_request(generation, key, timeout_ms):
    # KvWaitRequest { generation (1), keys (2), timeout_ms (3) }
    return (field_varint(1, generation) + field_bytes(2, key) +
            field_varint(3, timeout_ms))


def status_summary(resp):
    """(state, generation, restarts, {rank: heartbeat_age_s})."""
    state = generation = restarts = 0
    ages = {}
    for num, _, v in parse(resp):
        if num == 2:
            state = v
        elif num == 4:
            generation = v
        elif num == 13:
            restarts = v
        elif num == 8:  # WorkerStatus { rank (4), heartbeat_age_s (6) }
            w = dict((n, x) for n, _, x in parse(v))
            if w.get(4, 0) >= 1 << 63:
                continue  # rank -1: a worker waiting to join, no heartbeats
            age = struct.unpack("<d", w[6])[0] if 6 in w else 0.0
            ages[w.get(4, 0)] = age
    return state, generation, restarts, ages


class Flood:
    def __init__(self, args):
        self.args = args
        md = []
        if args.token_file:
            token = open(args.token_file).read().strip()
            md = [("authorization", "Bearer " + token)]
        self.metadata = md
        self.generation = 0
        self.codes = {}
        # Refusals at the bound on all clients' calls (not per connection).
        self.at_total = 0
        self.outstanding = 0
        self.first_refusal = None
        self.other_errors = {}
        self.ages = {}
        self.state = 0
        self.restarts = 0
        self.polls = 0
        self.failed_polls = 0
        self.sent = 0

    def count(self, code):
        self.codes[code] = self.codes.get(code, 0) + 1

    async def one(self, stub, i):
        key = b"flood/never/%d" % i
        while True:
            req = kv_wait_request(self.generation, key, 20000)
            self.outstanding += 1
            self.sent += 1
            delay = 0
            try:
                await stub(req, timeout=25, metadata=self.metadata)
                self.count("OK")
            except grpc.aio.AioRpcError as e:
                code, details = e.code().name, e.details() or ""
                self.count(code)
                if code == "RESOURCE_EXHAUSTED":
                    if self.first_refusal is None:
                        self.first_refusal = details
                    if "from all clients" in details:
                        self.at_total += 1
                    delay = 1.0
                elif code == "FAILED_PRECONDITION":
                    m = re.search(r"current is (\d+)", details)
                    if m:
                        self.generation = int(m.group(1))
                    else:
                        delay = 0.5
                elif code not in ("DEADLINE_EXCEEDED", "CANCELLED"):
                    self.other_errors.setdefault(code, details)
                    delay = 0.5
            finally:
                self.outstanding -= 1
            if delay:
                await asyncio.sleep(delay)

    def watch(self):
        """Polls GetStatus (its own thread and connection) until the end."""
        ch = grpc.insecure_channel(
            self.args.addr, options=[("grpc.use_local_subchannel_pool", 1)])
        stub = ch.unary_unary("/cohort.Coordinator/GetStatus",
                              request_serializer=lambda x: x,
                              response_deserializer=lambda x: x)
        deadline = time.monotonic() + self.args.seconds
        failed_in_a_row = 0
        while time.monotonic() < deadline:
            try:
                resp = stub(b"", timeout=5, metadata=self.metadata)
                self.polls += 1
                failed_in_a_row = 0
                self.state, gen, self.restarts, ages = status_summary(resp)
                if gen:
                    self.generation = max(self.generation, gen)
                for rank, age in ages.items():
                    self.ages[rank] = max(self.ages.get(rank, 0), age)
                if self.args.until_done and self.state >= 2:
                    break
            except grpc.RpcError as e:
                self.failed_polls += 1
                # The coordinator exits once the job has ended (a busy one
                # answers late, which is counted, not taken for the end).
                gone = e.code() == grpc.StatusCode.UNAVAILABLE
                failed_in_a_row = failed_in_a_row + 1 if gone else 0
                if self.args.until_done and self.polls and failed_in_a_row >= 3:
                    break
            time.sleep(0.2)

    async def flood(self):
        a = self.args
        # A private subchannel pool: every channel its own connection.
        channels = [grpc.aio.insecure_channel(
            a.addr, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(a.channels)]
        stubs = [ch.unary_unary("/cohort.Coordinator/KvWait",
                                request_serializer=lambda x: x,
                                response_deserializer=lambda x: x)
                 for ch in channels]
        await asyncio.gather(*(self.one(stubs[i % a.channels], i)
                               for i in range(a.calls)))

    def summary(self, elapsed):
        a = self.args
        ages = ", ".join("rank %d %.1fs" % (r, age)
                         for r, age in sorted(self.ages.items()))
        lines = ["flood: calls %d over %d connections for %.1fs, sent %d; "
                 "refused RESOURCE_EXHAUSTED %d (at the total %d); answers "
                 "%s; in flight at "
                 "the end %d; heartbeat age max %.1fs (%s); status polls %d "
                 "(%d failed); job %s, restarts %d" % (
                     a.calls, a.channels, elapsed, self.sent,
                     self.codes.get("RESOURCE_EXHAUSTED", 0), self.at_total,
                     dict(sorted(self.codes.items())), self.outstanding,
                     max(self.ages.values(), default=0.0),
                     ages or "no workers", self.polls, self.failed_polls,
                     STATES.get(self.state, self.state), self.restarts)]
        if self.first_refusal:
            lines.append("flood: first refusal: " + self.first_refusal)
        for code, details in list(self.other_errors.items()):
            lines.append("flood: unexpected %s: %s" % (code, details))
        return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--calls", type=int, default=8000)
    p.add_argument("--channels", type=int, default=4)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--token-file")
    p.add_argument("--until-done", action="store_true")
    args = p.parse_args()
    flood = Flood(args)
    t0 = time.monotonic()

    def watch_then_leave():
        flood.watch()
        print(flood.summary(time.monotonic() - t0), flush=True)
        # The calls still waiting are abandoned: grpcio's asyncio layer has
        # been seen to hang closing thousands of them, and in interpreter
        # shutdown.
        os._exit(0)

    threading.Thread(target=watch_then_leave, daemon=True).start()
    asyncio.run(flood.flood())


if __name__ == "__main__":
    main()
