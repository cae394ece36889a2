#!/usr/bin/env python3
"""Emulate a USB GPS receiver on a pseudo-terminal, playing an NMEA fixture.

    tools/fake-receiver.py LOG [--baud 9600] [--rate 1] [--link PATH] [--loop] [--unplug-after N]

Prints the device path (and PATH when --link makes a symlink to it) on the first line of
standard output, then writes the log epoch by epoch: all sentences of one epoch in a burst,
then a pause so epochs arrive at --rate per second (as a real receiver does), each sentence
paced as it would be on a wire at --baud (10 bits per byte).

Like a real UART, it sends garbage when the reader's line speed differs from --baud (the pty
carries the speed the reader set), so baud-rate detection can be tried without hardware.

Try it with the serial source or with gpsd:

    tools/fake-receiver.py fixtures/walk-15min.nmea --link /tmp/ttyFAKE &
    keeptrack track --serial /tmp/ttyFAKE            # or: gpsd -N -n -s 9600 /tmp/ttyFAKE

--unplug-after N closes the pty after N epochs (the reader sees EIO, as when a USB receiver is
pulled out); with --replug-after S a new pty appears S seconds later behind the same --link.
--now moves every time and date so the log starts at the present moment: the location service
sees a live receiver (it rejects fixes older than 10 s), e.g. for `keeptrack track --serial ... --upload`.
Times stay on the wall clock: should the receiver fall behind it (a loaded machine delays its writes,
the process was stopped, the clock was set forward), the next epoch's time is moved up to now again,
as a real receiver's would be, instead of lagging until the next --loop (fixes 10 s late are stale).

--stamp FILE appends "epoch_index hhmmss.ss monotonic_ns" after writing each epoch's last byte
(latency measurements: CLOCK_MONOTONIC, the clock of the reader's machine). Stops on SIGTERM/SIGINT and removes the link.
"""
import argparse, datetime, gzip, os, random, signal, sys, termios, time, tty

BAUD_CONSTANTS = {
    4800: termios.B4800, 9600: termios.B9600, 19200: termios.B19200,
    38400: termios.B38400, 57600: termios.B57600, 115200: termios.B115200,
}


CHUNK = 8  # bytes per write: 8 ms at 9600 baud


def read_epochs(path):
    """Groups the log's lines into epochs: a new epoch starts when a timed sentence changes time."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    epochs, current, current_time = [], [], None
    with opener(path, "rb") as f:
        for raw in f:
            line = raw.rstrip(b"\r\n")
            if not line.startswith((b"$", b"!")):
                continue
            fields = line.split(b",")
            kind = fields[0][3:6] if len(fields[0]) >= 6 else b""
            t = None
            if kind in (b"GGA", b"RMC", b"GNS", b"ZDA", b"GST") and len(fields) > 1:
                t = fields[1]
            elif kind == b"GLL" and len(fields) > 5:
                t = fields[5]
            if t and current_time is not None and t != current_time and current:
                epochs.append(current)
                current = []
            if t:
                current_time = t
            current.append(line + b"\r\n")
    if current:
        epochs.append(current)
    return epochs


def epoch_time(lines):
    """The epoch's hhmmss(.ss) time field, from its first timed sentence."""
    for line in lines:
        fields = line.split(b",")
        kind = fields[0][3:6]
        if kind in (b"GGA", b"RMC", b"GNS", b"ZDA", b"GST") and len(fields) > 1 and fields[1]:
            return fields[1].decode()
        if kind == b"GLL" and len(fields) > 5 and fields[5]:
            return fields[5].decode()
    return "-"


class Pty:
    def __init__(self, link):
        self.master, self.slave = os.openpty()
        tty.setraw(self.master)
        # Never block on a reader that is not reading: drop the bytes, as a UART would.
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.link = link
        if link:
            tmp = link + ".tmp"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(self.path, tmp)
            os.replace(tmp, link)

    def reader_speed(self):
        try:
            attrs = termios.tcgetattr(self.master)
            return attrs[5]  # ospeed the reader configured
        except termios.error:
            return None

    def close(self):
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


TIME_FIELDS = {"GGA": (0,), "RMC": (0,), "GLL": (4,), "GNS": (0,), "ZDA": (0,), "GST": (0,), "GBS": (0,)}


def first_datetime(epochs):
    """The log's first dated time (RMC or ZDA), as a UTC datetime; today at the first time otherwise."""
    first_time = None
    for lines in epochs:
        for line in lines:
            f = line.decode("ascii", "replace").split("*")[0].split(",")
            kind = f[0][3:]
            try:
                if kind == "RMC" and len(f) > 9 and f[1] and f[9]:
                    return datetime.datetime.strptime(f[9] + f[1].split(".")[0], "%d%m%y%H%M%S").replace(
                        tzinfo=datetime.timezone.utc)
                if kind == "ZDA" and len(f) > 4 and f[1] and f[4]:
                    return datetime.datetime.strptime(f"{f[2]}{f[3]}{f[4]}{f[1].split('.')[0]}", "%d%m%Y%H%M%S").replace(
                        tzinfo=datetime.timezone.utc)
                if kind in TIME_FIELDS and first_time is None and len(f) > 1 and f[1]:
                    first_time = f[1].split(".")[0]
            except ValueError:
                continue
    today = datetime.datetime.now(datetime.timezone.utc).date()
    t = datetime.datetime.strptime(first_time or "000000", "%H%M%S").time()
    return datetime.datetime.combine(today, t, tzinfo=datetime.timezone.utc)


def epoch_seconds(epochs, start):
    """Each epoch's time as whole seconds after `start` (the log's first time), `None` for an epoch
    without a time; a time of day earlier than the previous epoch's by half a day is the next day's."""
    origin = start.hour * 3600 + start.minute * 60 + start.second
    out, previous = [], None
    for lines in epochs:
        hhmmss = epoch_time(lines).split(".")[0]
        try:
            t = datetime.datetime.strptime(hhmmss, "%H%M%S")
        except ValueError:
            out.append(None)
            continue
        s = t.hour * 3600 + t.minute * 60 + t.second - origin
        while previous is not None and s < previous - 43200:
            s += 86400
        out.append(s)
        previous = s
    return out


def retime(line, offset):
    """The sentence with its times and dates moved by `offset` (a timedelta), checksum recomputed."""
    text = line.decode("ascii", "replace").rstrip("\r\n")
    if not text.startswith("$") or "*" not in text:
        return line
    body = text[1:text.index("*")]
    f = body.split(",")
    kind = f[0][2:] if len(f[0]) == 5 else f[0][-3:]
    if kind not in TIME_FIELDS:
        return line
    idx = TIME_FIELDS[kind][0] + 1
    if len(f) <= idx or not f[idx]:
        return line
    hhmmss, _, frac = f[idx].partition(".")
    try:
        base = datetime.datetime.strptime(hhmmss, "%H%M%S")
    except ValueError:
        return line
    date = None
    if kind == "RMC" and len(f) > 9 and f[9]:
        date = datetime.datetime.strptime(f[9], "%d%m%y").date()
    elif kind == "ZDA" and len(f) > 4 and f[2] and f[3] and f[4]:
        date = datetime.date(int(f[4]), int(f[3]), int(f[2]))
    moved = datetime.datetime.combine(date or datetime.date(2000, 1, 1), base.time()) + offset
    f[idx] = moved.strftime("%H%M%S") + ("." + frac if frac else "")
    if kind == "RMC" and date:
        f[9] = moved.strftime("%d%m%y")
    if kind == "ZDA" and date:
        f[2], f[3], f[4] = moved.strftime("%d"), moved.strftime("%m"), moved.strftime("%Y")
    body = ",".join(f)
    checksum = 0
    for ch in body.encode("ascii"):
        checksum ^= ch
    return f"${body}*{checksum:02X}\r\n".encode("ascii")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--baud", type=int, default=9600, choices=sorted(BAUD_CONSTANTS))
    ap.add_argument("--rate", type=float, default=1.0, help="epochs per second (0 = as fast as the wire allows)")
    ap.add_argument("--link", help="also make this symlink to the pty (stable across replugs)")
    ap.add_argument("--loop", action="store_true")
    ap.add_argument("--unplug-after", type=int, help="close the pty after N epochs")
    ap.add_argument("--replug-after", type=float, help="with --unplug-after: reopen a new pty after S seconds")
    ap.add_argument("--stamp", help="append 'epoch monotonic_ns' per epoch to this file")
    ap.add_argument("--now", action="store_true",
                    help="move every time and date so the log starts now (a live receiver: the location service "
                         "rejects fixes older than 10 s)")
    args = ap.parse_args()

    epochs = read_epochs(args.log)
    if not epochs:
        sys.exit(f"fake-receiver: no NMEA sentences in {args.log}")
    pty = Pty(args.link)
    print(pty.path + (f" {args.link}" if args.link else ""), flush=True)

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stamp = open(args.stamp, "a") if args.stamp else None
    wanted = BAUD_CONSTANTS[args.baud]
    byte_time = 10.0 / args.baud
    noise = random.Random(7)
    sent = 0
    index = 0
    period = 1.0 / args.rate if args.rate > 0 else 0.0
    next_epoch = time.monotonic()
    start = first_datetime(epochs) if args.now else None
    seconds = epoch_seconds(epochs, start) if start is not None else None
    offset = None
    try:
        while not stopping:
            if index >= len(epochs):
                if not args.loop:
                    break
                index = 0
            if start is not None and (index == 0 or offset is None):
                offset = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - start
            elif start is not None and seconds[index] is not None:
                # Fallen behind the wall clock (pacing only ever slips later): move the times up to now,
                # by whole seconds so the fractions stay the log's. Within 2 s is ordinary pacing.
                behind = (datetime.datetime.now(datetime.timezone.utc) - start - offset).total_seconds() - seconds[index]
                if behind >= 2:
                    offset += datetime.timedelta(seconds=int(behind))
            for line in epochs[index]:
                mismatch = pty.reader_speed() not in (None, wanted)
                data = retime(line, offset) if offset is not None else line
                if mismatch:
                    # Wrong line speed: the reader sees framing garbage, not NMEA.
                    data = bytes(noise.randrange(256) for _ in range(len(line)))
                # A UART delivers bytes continuously: write small pieces at the wire's pace, so the
                # reader never sees a gap inside an epoch longer than a piece's wire time.
                for k in range(0, len(data), CHUNK):
                    piece = data[k:k + CHUNK]
                    try:
                        os.write(pty.master, piece)
                    except OSError:
                        pass  # nobody reading (buffer full, or no reader): a real UART drops the bytes too
                    if k + CHUNK < len(data) or line is not epochs[index][-1]:
                        time.sleep(len(piece) * byte_time)
            if stamp:
                stamp.write(f"{sent} {epoch_time(epochs[index])} {time.monotonic_ns()}\n")
                stamp.flush()
            sent += 1
            index += 1
            if args.unplug_after and sent == args.unplug_after:
                pty.close()
                if args.link and os.path.lexists(args.link):
                    os.unlink(args.link)
                if args.replug_after is None:
                    break
                time.sleep(args.replug_after)
                pty = Pty(args.link)
                print(pty.path + (f" {args.link}" if args.link else ""), flush=True)
                args.unplug_after = None
            next_epoch += period
            delay = next_epoch - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_epoch = time.monotonic()
    finally:
        pty.close()
        if args.link and os.path.lexists(args.link) and os.path.realpath(args.link) == pty.path:
            os.unlink(args.link)


if __name__ == "__main__":
    main()
