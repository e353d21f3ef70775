//go:build linux

package sandbox

import (
	"os"
	"testing"
)

// requireEnv turns the skips of isolation tests into failures: CI runs as
// root where namespaces, Landlock, cgroups and dedicated uids exist, and
// sets it, so a security test cannot pass there by skipping.
const requireEnv = "JSPARK_REQUIRE_ISOLATION"

// lacks skips a test whose isolation feature this machine lacks, or fails it
// where requireEnv says the feature must be there.
func lacks(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf(requireEnv+"=1, yet "+format, args...)
	}
	t.Skipf(format, args...)
}
