"""Reads a training log directory (log.dir, --log-dir) independently of
cohort and checks it against the run's JSON report.

The TensorBoard event files are read as TensorBoard reads them: TFRecord
framing with every masked CRC-32C checked (a CRC-32C written here, not
cohort's), Event protocol buffers parsed by classes protoc generated from
tests/tensorboard/*.proto (TensorBoard's definitions), files in name order,
and a SessionLog START at step S dropping the events read before with a
step of S or more.

  training_logs_check.py PB_DIR LOG_DIR REPORT [--from-step=S]
      [--started-after=UNIX_SECONDS] [--files=N] [--no-grad-norm]

PB_DIR holds the generated tests/tensorboard/*_pb2.py; S is the step the
run resumed from (its report's final_loss covers only the steps after it);
rows after S must have been written after UNIX_SECONDS; N event files are
expected. Prints what it checked; exits 1 on the first mismatch.
"""
import argparse
import csv
import glob
import json
import math
import os
import struct
import sys

TRAIN_COLUMNS = ["step", "epoch", "wall_time", "loss", "lr", "grad_norm",
                 "samples_per_s"]


def crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class Mismatch(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Mismatch(what)


def records(path):
    """The records of a TFRecord file, each CRC checked."""
    data = open(path, "rb").read()
    at, out = 0, []
    while at < len(data):
        expect(len(data) - at >= 16, "%s: torn record at byte %d" % (path, at))
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        expect(length_crc == masked_crc(header),
               "%s: bad length CRC at byte %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        expect(len(body) == length, "%s: torn record at byte %d" % (path, at))
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        expect(body_crc == masked_crc(body),
               "%s: bad data CRC at byte %d" % (path, at))
        out.append(body)
        at += 16 + length
    return out


def read_events(pb_dir, log_dir):
    """{tag: {step: value}} as TensorBoard shows it, and the file count."""
    sys.path.insert(0, pb_dir)
    from tests.tensorboard import event_pb2
    files = sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*")))
    scalars, count = {}, 0
    for path in files:
        for i, body in enumerate(records(path)):
            count += 1
            e = event_pb2.Event()
            e.ParseFromString(body)
            expect(not e.UnknownFields(), "%s: unknown fields" % path)
            expect(e.wall_time > 1.5e9, "%s: wall_time %r" % (path, e.wall_time))
            kind = e.WhichOneof("what")
            if i == 0:
                expect(kind == "file_version" and e.file_version == "brain.Event:2",
                       "%s: first event is %r" % (path, e))
            elif kind == "session_log":
                expect(e.session_log.status == event_pb2.SessionLog.START,
                       "%s: session_log %r" % (path, e.session_log))
                for series in scalars.values():
                    for step in [s for s in series if s >= e.step]:
                        del series[step]
            else:
                expect(kind == "summary", "%s: event of kind %s" % (path, kind))
                for v in e.summary.value:
                    expect(v.WhichOneof("value") == "simple_value",
                           "%s: %s is not a simple_value" % (path, v.tag))
                    series = scalars.setdefault(v.tag, {})
                    # A step written twice and not dropped by a START
                    # between: two writers, or a resume that did not say
                    # where it restarted.
                    expect(e.step not in series,
                           "%s: %s at step %d twice" % (path, v.tag, e.step))
                    series[e.step] = v.simple_value
    return scalars, len(files), count


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    expect(rows, "%s is empty" % path)
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def close(a, b, rel=1e-6, what=""):
    expect(abs(a - b) <= rel * max(1.0, abs(a), abs(b)),
           "%s: %r != %r" % (what, a, b))


def report_close(a, b, what):
    """The JSON report holds 6 significant digits."""
    close(a, b, rel=1e-5, what=what)


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def steps_of(name, rows):
    for r in rows:
        expect(r["step"].isdigit(), "%s row %r is not a step's (another "
               "writer's header?)" % (name, list(r.values())))
    return [int(r["step"]) for r in rows]


def check_train(rows, report, args):
    steps = steps_of("train.csv", rows)
    expect(steps == list(range(1, report["steps"] + 1)),
           "train.csv steps %s... are not 1..%d once each"
           % (steps[:5], report["steps"]))
    this_run = [r for r in rows if int(r["step"]) > args.from_step]
    tail = [float(r["loss"]) for r in this_run[-100:]]
    report_close(sum(tail) / len(tail), report["final_loss"], "final_loss")
    close(float(rows[-1]["lr"]), report["final_lr"], what="final_lr")
    expect(int(rows[-1]["epoch"]) == report["epochs"],
           "last epoch %s, report epochs %d" % (rows[-1]["epoch"], report["epochs"]))
    for r in rows:
        expect(float(r["samples_per_s"]) > 0, "samples_per_s in %r" % r)
        if args.grad_norm:
            expect(float(r["grad_norm"]) > 0, "grad_norm in %r" % r)
        written_now = float(r["wall_time"]) >= args.started_after
        expect(written_now == (int(r["step"]) > args.from_step),
               "row of step %s written at %s (run started %s)"
               % (r["step"], r["wall_time"], args.started_after))
    return len(this_run)


def check_eval(rows, report):
    steps = steps_of("eval.csv", rows)
    expect(steps == sorted(set(steps)), "eval.csv steps %s repeat" % steps)
    last = rows[-1]
    expect(int(last["step"]) == report["steps"], "last evaluation's step")
    report_close(float(last["accuracy"]), report["test_accuracy"], "test_accuracy")
    report_close(float(last["loss"]), report["test_loss"], "test_loss")
    by_step = {int(r["step"]): r for r in rows}
    # Epoch ends by the steps of each epoch, from the first.
    expect(report["epoch_results"][0]["epoch"] == 1, "first epoch result")
    end = 0
    for e in report["epoch_results"]:
        end += e["steps"]
        if e["test_accuracy"] is None:
            continue
        expect(end in by_step, "no evaluation at epoch %d's end (step %d)"
               % (e["epoch"], end))
        report_close(float(by_step[end]["accuracy"]), e["test_accuracy"],
                     "epoch %d accuracy" % e["epoch"])
        expect(int(by_step[end]["epoch"]) == e["epoch"], "epoch of step %d" % end)


def check_events(scalars, train_rows, eval_rows):
    for tag, column in [("train/loss", "loss"), ("train/lr", "lr")]:
        series = scalars.get(tag, {})
        expect(sorted(series) == [int(r["step"]) for r in train_rows],
               "%s steps differ from train.csv" % tag)
        for r in train_rows:
            close(series[int(r["step"])], as_float32(float(r[column])),
                  what="%s at %s" % (tag, r["step"]))
    series = scalars.get("eval/accuracy", {})
    expect(sorted(series) == [int(r["step"]) for r in eval_rows],
           "eval/accuracy steps differ from eval.csv")
    for r in eval_rows:
        close(series[int(r["step"])], as_float32(float(r["accuracy"])),
              what="eval/accuracy at %s" % r["step"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pb_dir")
    p.add_argument("log_dir")
    p.add_argument("report")
    p.add_argument("--from-step", type=int, default=0)
    p.add_argument("--started-after", type=float, default=0)
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--no-grad-norm", dest="grad_norm", action="store_false")
    args = p.parse_args()
    report = json.load(open(args.report))
    try:
        header, train = read_csv(os.path.join(args.log_dir, "train.csv"))
        expect(header == TRAIN_COLUMNS, "train.csv header %s" % header)
        run_rows = check_train(train, report, args)
        header, evals = read_csv(os.path.join(args.log_dir, "eval.csv"))
        expect(header[:4] == ["step", "epoch", "wall_time", "loss"],
               "eval.csv header %s" % header)
        check_eval(evals, report)
        scalars, files, count = read_events(args.pb_dir, args.log_dir)
        expect(files == args.files, "%d event files, want %d" % (files, args.files))
        check_events(scalars, train, evals)
    except Mismatch as m:
        print("mismatch: %s" % m)
        return 1
    except (KeyError, ValueError, IndexError) as e:
        print("unreadable logs: %r" % e)
        return 1
    print("%d steps (%d this run), %d evaluations, %d event records in %d "
          "files, CRCs valid, final loss %.6g, accuracy %.4g"
          % (len(train), run_rows, len(evals), count, files,
             report["final_loss"], report["test_accuracy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
