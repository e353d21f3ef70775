package sandbox

// The sandbox's types, on every system; what runs them needs Linux
// (sandbox.go and the files beside it), other systems get other.go.

import (
	"errors"
	"io"
)

// Options configure a sandbox.
type Options struct {
	Limits       Limits    // zero: DefaultLimits
	NoNamespaces bool      // run with rlimits and process groups only, even where namespaces work
	Log          io.Writer // where the once-per-process isolation warning goes (nil: stderr)
	// ReadOnly are host folders the sandbox sees read-only at the same path
	// (an external agent's install folder, say); absolute paths.
	ReadOnly []string
	// Programs the tasks run beyond python3 and bash (names looked up on
	// PATH, or absolute paths; node for an external agent): with namespaces
	// the sandbox sees each one's install prefix read-only where it lies
	// outside the system directories (see programBinds).
	Programs []string
}

// Result is what one command did.
type Result struct {
	Output    string // PTY output, capped, with a marker where bytes were cut
	ExitCode  int    // 124 after a timeout, as timeout(1) reports
	TimedOut  bool
	Truncated bool
	Restarted bool // the shell died or had to be killed; its state (cwd, variables) is gone
}

// Limits bound a sandbox: rlimits for each of its processes and, where the
// machine gives a cgroup, its processes together.
type Limits struct {
	CPUSeconds   uint64 `json:"cpu_seconds"`   // per process
	AddressSpace uint64 `json:"address_space"` // bytes, per process
	Processes    uint64 `json:"processes"`     // per sandbox user, and the cgroup's pids.max
	FileSize     uint64 `json:"file_size"`     // bytes, per file written (the write tool's bound too)
	OpenFiles    uint64 `json:"open_files"`
	Memory       uint64 `json:"memory"`     // bytes, all processes and their tmpfs pages together (cgroup)
	CPUWeight    uint64 `json:"cpu_weight"` // cgroup v2 cpu.weight (1..10000, 100 is a plain process's share)
	Workspace    uint64 `json:"workspace"`  // bytes the workspace may hold (a tmpfs of that size, as root)
}

// DefaultLimits suit compiling and testing small programs.
var DefaultLimits = Limits{CPUSeconds: 300, AddressSpace: 8 << 30, Processes: 256, FileSize: 256 << 20, OpenFiles: 1024,
	Memory: 4 << 30, CPUWeight: 100, Workspace: 1 << 30}

// Home is where the workspace appears inside a namespaced sandbox.
const Home = "/home/agent"

// Kept is what the copy of a capped workspace holds on disk, for the
// session's results (results.json).
type Kept struct {
	Files int   `json:"files"` // regular files, every name of a hard-linked one
	Bytes int64 `json:"bytes"` // file data written: holes and further names cost nothing
	// LeftOut counts the files not copied (or whose copy is an older
	// version): over the cap, or failed (Error says the first failure).
	LeftOut      int    `json:"left_out,omitempty"`
	LeftOutBytes int64  `json:"left_out_bytes,omitempty"`
	Capped       bool   `json:"capped,omitempty"` // some were left out at the cap
	Error        string `json:"error,omitempty"`
}

// ErrOutside is the error of a path that leaves the workspace.
var ErrOutside = errors.New("path leaves the workspace")

// ErrNotRegular is the error of a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")
