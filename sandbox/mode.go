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
	Landlock   int      `json:"landlock_abi,omitempty"` // the Landlock ABI in force; 0: none
	Workspace  string   `json:"workspace"`              // a capped tmpfs or the host folder
	Warnings   []string `json:"warnings,omitempty"`
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
	if i.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("Landlock ABI %d", i.Landlock))
	} else {
		parts = append(parts, "no Landlock")
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
