package sandbox

import (
	"fmt"
	"strings"
)

// Isolation says what confines a sandbox, for results and the start output;
// Warnings are what it lacks here, each worth saying loudly.
type Isolation struct {
	Namespaces bool     `json:"namespaces"`
	Cgroup     string   `json:"cgroup"`                 // "cgroup v2", "cgroup v1" or "none"
	Root       string   `json:"root"`                   // what of the host's files the sandbox sees
	ReadOnly   []string `json:"read_only,omitempty"`    // host folders bound read-only beyond the system ones
	Landlock   int      `json:"landlock_abi,omitempty"` // the Landlock ABI in force; 0: none
	// LandlockNote says why Landlock is not in force ("unavailable (ABI probe: ENOSYS)").
	LandlockNote string `json:"landlock,omitempty"`
	// Seccomp says what the seccomp filter of a sandbox without namespaces
	// does, or why there is none (empty with namespaces: no host socket is
	// in the sandbox's root).
	Seccomp   string   `json:"seccomp,omitempty"`
	Workspace string   `json:"workspace"` // a capped tmpfs or the host folder
	Warnings  []string `json:"warnings,omitempty"`
}

// Mode is the one line that says it.
func (i Isolation) Mode() string {
	var parts []string
	if i.Namespaces {
		parts = append(parts, "namespaces (user, mount, pid, network)")
	} else {
		parts = append(parts, "NO namespaces")
	}
	parts = append(parts, "resources: "+i.Cgroup)
	parts = append(parts, "root: "+i.Root)
	if i.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("landlock: ABI %d", i.Landlock))
	} else {
		parts = append(parts, "landlock: "+i.LandlockNote)
	}
	if i.Seccomp != "" {
		parts = append(parts, "seccomp: "+i.Seccomp)
	}
	parts = append(parts, "workspace: "+i.Workspace)
	return "isolation: " + strings.Join(parts, "; ")
}

// bytesText writes a size the way limits are usually given.
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
