#!/usr/bin/env python3
"""An independent gRPC client for tests/security_test.sh (Python's grpcio;
nothing of cohort's own code), able to send a job token and speak TLS.

  security_probe.py methods ADDR PROTO [options]
      Calls every rpc the .proto file's service declares, each with one
      empty request message, and prints "NAME CODE DETAILS" per method.
  security_probe.py health ADDR [options]
      Prints the grpc.health.v1 status (SERVING, ...) or "CODE DETAILS".

Options: --token-file F (sends "authorization: Bearer <token>"),
--ca F (TLS, trusting F), --cert F --key F (client certificate).
"""
import argparse
import re
import sys

import grpc


def channel(args):
    if not args.ca:
        return grpc.insecure_channel(args.addr)
    read = lambda p: open(p, "rb").read() if p else None
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(args.ca), private_key=read(args.key),
        certificate_chain=read(args.cert))
    return grpc.secure_channel(args.addr, creds)


def metadata(args):
    if not args.token_file:
        return None
    token = open(args.token_file).read().strip()
    return [("authorization", "Bearer " + token)]


def rpcs(proto):
    """(service full name, [method names]) of the file's one service."""
    text = open(proto).read()
    package = re.search(r"^package\s+([\w.]+);", text, re.M).group(1)
    service = re.search(r"^service\s+(\w+)", text, re.M).group(1)
    return "%s.%s" % (package, service), re.findall(r"^\s*rpc\s+(\w+)", text, re.M)


def call(ch, method, md):
    """The final status of `method` called with one empty message."""
    # Any method can be driven as a bidirectional stream on the wire.
    stub = ch.stream_stream(method, request_serializer=lambda x: x,
                            response_deserializer=lambda x: x)
    try:
        for _ in stub(iter([b""]), timeout=10, metadata=md):
            pass
        return "OK", ""
    except grpc.RpcError as e:
        return e.code().name, e.details()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["methods", "health"])
    p.add_argument("addr")
    p.add_argument("proto", nargs="?")
    p.add_argument("--token-file")
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    args = p.parse_args()
    with channel(args) as ch:
        if args.command == "health":
            unary = ch.unary_unary("/grpc.health.v1.Health/Check",
                                   request_serializer=lambda x: x,
                                   response_deserializer=lambda x: x)
            try:
                resp = unary(b"", timeout=10, metadata=metadata(args))
            except grpc.RpcError as e:
                print(e.code().name, e.details())
                return
            # HealthCheckResponse { status (1): enum }
            status = resp[1] if len(resp) >= 2 and resp[0] == 0x08 else 0
            print({0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING"}.get(status))
            return
        service, names = rpcs(args.proto)
        if not names:
            sys.exit("no rpc in " + args.proto)
        for name in names:
            code, details = call(ch, "/%s/%s" % (service, name), metadata(args))
            print(name, code, details)


if __name__ == "__main__":
    main()
