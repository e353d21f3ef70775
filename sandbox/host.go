//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strings"
)

// Without namespaces a sandbox runs on the host as its own uid (as root) or
// jspark's, with rlimits, its cgroup and process cleanup, and where the
// kernel has them:
//
//   - Landlock, which opens only the allowlist of files: system folders, a
//     curated /etc, the read-only binds, the workspace, /dev/shm and a
//     temporary folder of its own (TMPDIR), not the host's /tmp;
//   - a seccomp filter that refuses new unix sockets (seccomp.go), so that
//     no host socket can be reached by its path.
//
// What stays open is said in the warning: the host's network and
// processes, and /dev/shm.

// seccompOn is Isolation.Seccomp where the filter is in force.
const seccompOn = "no new unix sockets but connected stream pairs; no io_uring"

// openHost says what confines a sandbox without namespaces (why there are
// none) and makes its temporary folder.
func (s *Sandbox) openHost(why string) error {
	// Under /tmp (open to every uid) where it can: Landlock's rule for it is
	// made by path, as the sandbox's uid.
	base := "/tmp"
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		base = ""
	}
	tmp, err := os.MkdirTemp(base, "jspark-tmp-")
	if err != nil {
		return fmt.Errorf("sandbox: temporary folder: %w", err)
	}
	s.tmp = tmp
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	if s.dedicated {
		if err := os.Chown(tmp, s.uid, s.uid); err != nil {
			return err
		}
	}
	s.iso.Seccomp = seccompOn
	if note := seccompProbe(); note != "" {
		s.iso.Seccomp = note
	}
	var closed, open []string
	open = append(open, "the host's network (any address, the host's own services on loopback included)",
		"its processes (they can read jspark's command line in /proc: pass API keys with JSPARK_API_KEY or a key file, never --api-key)",
		"/dev/shm")
	if s.iso.Landlock > 0 {
		s.iso.Root = "the host's, opened only on the allowlist by Landlock (the workspace, a temporary folder of its own, system directories, a curated /etc, /dev/shm, the read-only binds)"
		closed = append(closed, "files but the allowlist (Landlock), the host's /tmp included (TMPDIR is a folder of its own)")
	} else {
		s.iso.Root = "the host's, every file its uid may read"
		open = append(open, fmt.Sprintf("every file uid %d may read or write, the host's /tmp included", s.uid))
	}
	if s.iso.Seccomp == seccompOn {
		closed = append(closed, "unix sockets: none can be made but connected pairs (seccomp), so no host socket is reachable")
	} else {
		open = append(open, "the host's unix sockets (no seccomp filter: "+s.iso.Seccomp+")")
	}
	w := fmt.Sprintf("NO NAMESPACES (%s): commands run as uid %d and reach %s", why, s.uid, strings.Join(open, "; "))
	if len(closed) > 0 {
		w += "; closed to them: " + strings.Join(closed, "; ")
	}
	s.iso.Warnings = append(s.iso.Warnings, w)
	return nil
}
