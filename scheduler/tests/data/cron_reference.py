#!/usr/bin/env python3
"""An independent reference for cron fire instants, for checking `scheduler::schedule`.

It shares no code and no algorithm with the Rust implementation: it walks real instants
(minute by minute, or second by second when the seconds field is not just `0`), reads each
instant's wall clock with `zoneinfo`, and applies the documented DST policy by looking at what
the wall clock did:

- fixed-time job (neither the minute nor the hour field starts with `*`, cronie's rule): an
  instant fires when its wall clock matches and that wall-clock time has not happened before
  (a repeated range runs once, at the first occurrence), or when it is the first instant after
  a gap in which some skipped wall-clock time matches;
- interval job (the minute or the hour field starts with `*`): an instant fires whenever its
  wall clock matches (nothing in a gap, both occurrences in a repeated range).

Syntax supported: 5 or 6 fields of `*`, numbers, `a-b`, `/step` (`*/s`, `a-b/s`, `a/s` meaning
`a-max/s`), lists, three-letter month and day names, and the `@` aliases. No `L`, `W`, `#`
or `+`. Day of month and day of week follow Vixie cron: both restricted -> either matches; a
field that starts with `*` counts as unrestricted -> both must match.

Python 3.11, standard library only.

    python3 cron_reference.py next '30 2 * * *' America/New_York 2026-03-07T12:00:00Z 3
    python3 cron_reference.py regenerate   # rewrites the generated rows of cron-vectors.tsv
    python3 cron_reference.py compare --bin target/debug/scheduler   # vs `scheduler next`
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAYS = "SUN MON TUE WED THU FRI SAT".split()

# (name, lowest value, highest value `*` runs to, highest value that may be written)
FIELDS = [
    ("second", 0, 59, 59),
    ("minute", 0, 59, 59),
    ("hour", 0, 23, 23),
    ("day-of-month", 1, 31, 31),
    ("month", 1, 12, 12),
    ("day-of-week", 0, 6, 7),
]

# Far enough back that the first occurrence of any repeated wall-clock time is seen.
LOOKBACK = timedelta(hours=26)
HORIZON = timedelta(days=400)


def _value(token: str, field: str, low: int, written_max: int) -> int:
    upper = token.upper()
    if field == "month" and upper in MONTHS:
        return MONTHS.index(upper) + 1
    if field == "day-of-week" and upper in DAYS:
        return DAYS.index(upper)
    if not token.isdigit():
        raise ValueError(f"{field}: unsupported value `{token}`")
    value = int(token)
    if not low <= value <= written_max:
        raise ValueError(f"{field}: `{token}` out of range")
    return value


def parse_field(text: str, field: str, low: int, star_max: int, written_max: int) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = int(step_text) if slash else 1
        if step < 1:
            raise ValueError(f"{field}: bad step in `{item}`")
        if base == "*":
            start, end = low, star_max
        elif "-" in base:
            a, b = base.split("-")
            start = _value(a, field, low, written_max)
            end = _value(b, field, low, written_max)
            if field == "day-of-week" and end == 0 and start > 0:
                end = 7  # `FRI-SUN`
        else:
            start = _value(base, field, low, written_max)
            end = max(star_max, start) if slash else start
        if start > end:
            raise ValueError(f"{field}: reversed range `{item}`")
        for value in range(start, end + 1, step):
            values.add(value % 7 if field == "day-of-week" else value)
    return values


class Cron:
    def __init__(self, expression: str):
        text = expression.strip()
        if text.startswith("@"):
            text = ALIASES[text.lower()]
        parts = text.split()
        if len(parts) == 5:
            parts = ["0"] + parts
        if len(parts) != 6:
            raise ValueError(f"`{expression}`: expected 5 or 6 fields")
        self.expression = expression
        self.sets = [
            parse_field(part, name, low, star_max, written_max)
            for part, (name, low, star_max, written_max) in zip(parts, FIELDS)
        ]
        self.dom_star = parts[3].startswith("*")
        self.dow_star = parts[5].startswith("*")
        # cronie: MIN_STAR / HR_STAR. The seconds field plays no part.
        self.fixed_time = not parts[1].startswith("*") and not parts[2].startswith("*")
        # Walk second by second only when some second other than 0 matches.
        self.step = timedelta(seconds=1 if self.sets[0] != {0} else 60)

    def matches(self, wall: datetime) -> bool:
        seconds, minutes, hours, doms, months, dows = self.sets
        if wall.second not in seconds or wall.minute not in minutes or wall.hour not in hours:
            return False
        if wall.month not in months:
            return False
        dom = wall.day in doms
        dow = wall.isoweekday() % 7 in dows
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow


def wall_clock(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def fires_between(cron: Cron, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Every fire instant in `(after, until]`, by walking real instants."""
    step = cron.step
    step_seconds = int(step.total_seconds())
    start = after - LOOKBACK
    start = datetime.fromtimestamp(start.timestamp() // step_seconds * step_seconds, timezone.utc)
    seen: set[datetime] = set()
    fires = []
    previous = wall_clock(start - step, zone)
    instant = start
    while instant <= until:
        wall = wall_clock(instant, zone)
        if cron.fixed_time:
            fire = cron.matches(wall) and wall not in seen
            # The wall clock jumped: the times it skipped never happen, and a fixed-time job
            # due in them runs now, at the first instant after the gap.
            skipped = previous + step
            while not fire and skipped < wall:
                fire = cron.matches(skipped)
                skipped += step
            seen.add(wall)
        else:
            fire = cron.matches(wall)
        if fire and instant > after:
            fires.append(instant)
        previous = wall
        instant += step
    return fires


def next_fires(expression: str, zone_name: str, after: datetime, count: int) -> list[datetime]:
    cron = Cron(expression)
    zone = ZoneInfo(zone_name)
    window = timedelta(days=2) if cron.step.total_seconds() == 60 else timedelta(hours=6)
    fires: list[datetime] = []
    until = after
    while len(fires) < count:
        if until - after > HORIZON:
            raise RuntimeError(f"`{expression}`: fewer than {count} fires within {HORIZON}")
        # Each window is walked with its own lookback, so the seen-set is always complete.
        fires += fires_between(cron, zone, until, until + window)
        until += window
    return fires[:count]


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def show(instant: datetime) -> str:
    return instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- generated golden rows ----

# (expression, zone, after): rows appended to cron-vectors.tsv with three expected fires each.
# Lord Howe 2026: 02:00 LHDT (+11:00) goes back to 01:30 LHST (+10:30) on 5 April (14:30Z to
# 15:00Z repeats 01:30-01:59); 02:00 LHST goes forward to 02:30 LHDT on 4 October (15:30Z).
GENERATED_CASES = [
    # Lord Howe, spring forward: 02:00-02:29 never happens.
    ("30 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    ("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    ("0 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    ("0,15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    ("10 1-3 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    ("*/20 2 * * *", "Australia/Lord_Howe", "2026-10-03T15:00:00Z"),
    ("*/15 * * * *", "Australia/Lord_Howe", "2026-10-03T15:10:00Z"),
    ("0 */2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z"),
    # Lord Howe, fall back: 01:30-01:59 happens twice.
    ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00Z"),
    ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:50:00Z"),
    ("0 2 * * *", "Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
    ("15 2 * * *", "Australia/Lord_Howe", "2026-04-04T15:10:00Z"),
    ("0,15,30,45 1,2 * * *", "Australia/Lord_Howe", "2026-04-04T15:10:00Z"),
    ("*/20 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:30:00Z"),
    ("*/20 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:50:00Z"),
    ("0,30 * * * *", "Australia/Lord_Howe", "2026-04-04T14:15:00Z"),
    ("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:50:00Z"),
    ("@hourly", "Australia/Lord_Howe", "2026-04-04T14:15:00Z"),
    ("0 30 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:45:00Z"),
    # cronie's rule in whole-hour zones: a minute field starting with `*` makes an interval job.
    ("*/20 1 * * *", "America/New_York", "2026-11-01T05:10:00Z"),
    ("*/20 1 * * *", "America/New_York", "2026-11-01T06:10:00Z"),
    ("*/10 2 * * *", "America/New_York", "2026-03-08T06:00:00Z"),
    ("* 1 * * *", "Europe/London", "2026-10-25T01:58:00Z"),
    ("*/30 1 * * *", "Europe/London", "2026-10-25T00:10:00Z"),
    ("*/30 1 * * *", "Europe/London", "2026-03-29T00:10:00Z"),
    ("0,30 1 * * *", "Europe/London", "2026-10-25T00:10:00Z"),
    # A fixed-time job asked from the second half of the repeated hour.
    ("0 2 * * *", "America/New_York", "2026-11-01T06:00:00Z"),
    ("0,20,40 1,2 * * *", "America/New_York", "2026-11-01T06:10:00Z"),
]

GENERATED_MARKER = "# ---- generated by cron_reference.py"


def generated_rows() -> list[str]:
    rows = []
    for expression, zone, after in GENERATED_CASES:
        fires = next_fires(expression, zone, parse_instant(after), 3)
        rows.append("\t".join([expression, zone, after, " ".join(show(f) for f in fires)]))
    return rows


def regenerate(path: Path) -> None:
    lines = path.read_text().splitlines()
    marker = next((i for i, line in enumerate(lines) if line.startswith(GENERATED_MARKER)), None)
    if marker is None:
        raise SystemExit(f"{path}: no line starting with `{GENERATED_MARKER}`")
    kept = lines[: marker + 1]
    path.write_text("\n".join(kept + generated_rows()) + "\n")


# ---- comparison against the Rust implementation ----

COMPARE_EXPRESSIONS = [
    "*/20 1 * * *",
    "*/15 * * * *",
    "30 2 * * *",
    "15 2 * * *",
    "45 1 * * *",
    "0,30 * * * *",
    "*/10 2 * * *",
    "0 2 * * *",
    "10 1-3 * * *",
    "0 */2 * * *",
    "0 1 * * *",
    "30 1 * * *",
    "0,15,30,45 1,2 * * *",
    "0,15 2 * * *",
    "5 0-4 * * *",
    "*/7 0-3 * * *",
    "59 1 * * *",
    "0 3 * * *",
    "@hourly",
    "@daily",
    "0 30 1 * * *",
    "30 */20 1 * * *",
    "*/20 30 1 * * *",
    "*/30 15 2 * * *",
]
COMPARE_ZONES = ["Australia/Lord_Howe", "America/New_York", "Europe/London"]


def transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    out = []
    instant = datetime(year, 1, 1, tzinfo=timezone.utc)
    end = datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    offset = instant.astimezone(zone).utcoffset()
    while instant < end:
        instant += timedelta(minutes=30)
        now = instant.astimezone(zone).utcoffset()
        if now != offset:
            out.append(instant)
            offset = now
    return out


def compare(binary: str, count: int, spacing_minutes: int) -> int:
    failures = checked = 0
    for zone_name in COMPARE_ZONES:
        zone = ZoneInfo(zone_name)
        for change in transitions(zone, 2026):
            afters = [
                change + timedelta(minutes=m)
                for m in range(-180, 181, spacing_minutes)
            ]
            afters += [change + timedelta(seconds=s) for s in (-61, -1, 1, 59, 450)]
            afters += [change + timedelta(minutes=m) for m in (-30, 30)]
            for expression in COMPARE_EXPRESSIONS:
                cron = Cron(expression)
                first = min(afters)
                window = timedelta(days=4)
                everything = fires_between(cron, zone, first, max(afters) + window)
                for after in sorted(set(afters)):
                    expected = [f for f in everything if f > after][:count]
                    assert len(expected) == count, (expression, zone_name, after)
                    result = subprocess.run(
                        [binary, "next", expression, "--tz", zone_name,
                         "--after", show(after), "--count", str(count)],
                        capture_output=True, text=True, check=True,
                    )
                    actual = result.stdout.split()
                    checked += 1
                    if actual != [show(f) for f in expected]:
                        failures += 1
                        print(
                            f"MISMATCH `{expression}` {zone_name} after {show(after)}:\n"
                            f"  reference {' '.join(show(f) for f in expected)}\n"
                            f"  scheduler {' '.join(actual)}"
                        )
    print(f"{checked} cases, {failures} mismatches")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("next", help="print the next fire instants, one a line (UTC)")
    one.add_argument("expression")
    one.add_argument("zone")
    one.add_argument("after", help="exclusive, e.g. 2026-03-07T12:00:00Z")
    one.add_argument("count", type=int, nargs="?", default=3)
    rows = commands.add_parser("regenerate", help="rewrite the generated rows of the vectors")
    rows.add_argument("--vectors", type=Path, default=Path(__file__).with_name("cron-vectors.tsv"))
    check = commands.add_parser("compare", help="compare with `scheduler next` around 2026's clock changes")
    check.add_argument("--bin", required=True, help="path to the built `scheduler` binary")
    check.add_argument("--count", type=int, default=4)
    check.add_argument("--spacing", type=int, default=5, help="minutes between `after`s")
    args = parser.parse_args()

    if args.command == "next":
        for fire in next_fires(args.expression, args.zone, parse_instant(args.after), args.count):
            print(show(fire))
        return 0
    if args.command == "regenerate":
        regenerate(args.vectors)
        return 0
    return compare(args.bin, args.count, args.spacing)


if __name__ == "__main__":
    sys.exit(main())
