import json
import os
import subprocess
import sys
import tempfile
import unittest
from logsum import summarize


def record(level="INFO", service="api", latency=10, msg="ok", stamp="2026-01-01T00:00:00Z"):
    return f"{stamp} {level} service={service} latency_ms={latency} msg={msg}"


class TestSummaryHidden(unittest.TestCase):
    def test_empty(self):
        s = summarize([])
        self.assertEqual((s["count"], s["malformed"]), (0, 0))
        self.assertEqual(s["services"], {})

    def test_fields_in_any_order_and_msg_to_the_end(self):
        s = summarize([
            "2026-01-01T00:00:00Z INFO latency_ms=7 service=web msg=a b=c d",
            "2026-01-01T00:00:01Z DEBUG service=web latency_ms=9 msg=",
        ])
        self.assertEqual((s["count"], s["malformed"]), (2, 0))
        self.assertEqual(s["services"]["web"]["count"], 2)
        self.assertEqual(s["levels"]["DEBUG"], 1)

    def test_malformed_lines(self):
        bad = [
            "not-a-time INFO service=api latency_ms=1 msg=x",
            "2026-13-45T99:00:00Z INFO service=api latency_ms=1 msg=x",
            "2026-01-01T00:00:00Z TRACE service=api latency_ms=1 msg=x",
            "2026-01-01T00:00:00Z info service=api latency_ms=1 msg=x",
            "2026-01-01T00:00:00Z INFO latency_ms=1 msg=no service",
            "2026-01-01T00:00:00Z INFO service=api msg=no latency",
            "2026-01-01T00:00:00Z INFO service=api latency_ms=fast msg=x",
        ]
        s = summarize(bad + [record()])
        self.assertEqual(s["malformed"], len(bad))
        self.assertEqual(s["count"], 1)
        self.assertEqual(s["levels"], {"INFO": 1})

    def test_timestamps_with_offsets_and_fractions(self):
        s = summarize([
            record(stamp="2026-01-01T00:00:00.250Z"),
            record(stamp="2026-01-01T02:00:00+02:00"),
            record(stamp="2026-01-01T00:00:00"),
        ])
        self.assertEqual((s["count"], s["malformed"]), (3, 0))

    def test_nearest_rank_percentiles(self):
        lines = [record(latency=v) for v in [20, 1, 19, 2, 18, 3, 17, 4, 16, 5, 15, 6, 14, 7, 13, 8, 12, 9, 11, 10]]
        api = summarize(lines)["services"]["api"]
        self.assertEqual((api["p50"], api["p95"]), (10, 19))
        one = summarize([record(latency=42)])["services"]["api"]
        self.assertEqual((one["p50"], one["p95"]), (42, 42))
        three = summarize([record(latency=v) for v in (30, 10, 20)])["services"]["api"]
        self.assertEqual((three["p50"], three["p95"]), (20, 30))

    def test_errors_per_service(self):
        s = summarize([
            record(level="ERROR", service="a"),
            record(level="ERROR", service="a"),
            record(level="WARN", service="a"),
            record(level="INFO", service="b"),
        ])
        self.assertEqual(s["services"]["a"]["errors"], 2)
        self.assertEqual(s["services"]["b"]["errors"], 0)
        self.assertEqual(s["levels"]["ERROR"], 2)
        self.assertEqual(s["levels"].get("DEBUG", 0), 0)

    def test_command_line_prints_sorted_json(self):
        lines = [record(service="zeta", latency=5), record(level="ERROR", service="alpha", latency=8), "junk"]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.log")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            here = os.path.dirname(os.path.abspath(__file__))
            out = subprocess.run([sys.executable, os.path.join(here, "logsum.py"), path],
                                 capture_output=True, text=True, timeout=20, cwd=here)
        self.assertEqual(out.returncode, 0, out.stderr)
        keys = []
        parsed = json.loads(out.stdout, object_pairs_hook=lambda pairs: keys.append([k for k, _ in pairs]) or dict(pairs))
        self.assertEqual(parsed, summarize(lines))
        for k in keys:
            self.assertEqual(k, sorted(k))
