import json
import math
import sys
from datetime import datetime

LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")


def parse(line):
    """The record of one line as (level, service, latency), or None."""
    parts = line.split(" ", 2)
    if len(parts) != 3:
        return None
    stamp, level, rest = parts
    try:
        datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if level not in LEVELS:
        return None
    fields = {}
    while rest:
        key, eq, value = rest.partition("=")
        if not eq or not key or " " in key or key in fields:
            return None
        if key == "msg":
            fields[key] = value
            break
        value, _, rest = value.partition(" ")
        fields[key] = value
    if set(fields) != {"service", "latency_ms", "msg"} or not fields["service"]:
        return None
    latency = fields["latency_ms"]
    if not latency.isascii() or not latency.isdigit():
        return None
    return level, fields["service"], int(latency)


def nearest_rank(sorted_values, p):
    return sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]


def summarize(lines):
    count = malformed = 0
    levels = {}
    latencies = {}
    errors = {}
    for line in lines:
        record = parse(line.rstrip("\n"))
        if record is None:
            malformed += 1
            continue
        level, service, latency = record
        count += 1
        levels[level] = levels.get(level, 0) + 1
        latencies.setdefault(service, []).append(latency)
        errors[service] = errors.get(service, 0) + (level == "ERROR")
    services = {}
    for name, values in latencies.items():
        values.sort()
        services[name] = {
            "count": len(values),
            "errors": errors[name],
            "p50": nearest_rank(values, 50),
            "p95": nearest_rank(values, 95),
        }
    return {"count": count, "malformed": malformed, "levels": levels, "services": services}


def main(argv):
    if len(argv) != 2:
        print("usage: python3 logsum.py FILE", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        summary = summarize(f.read().splitlines())
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
