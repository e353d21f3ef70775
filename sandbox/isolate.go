package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits are the rlimits every sandboxed process starts with.
type Limits struct {
	CPUSeconds   uint64 `json:"cpu_seconds"`   // per process
	AddressSpace uint64 `json:"address_space"` // bytes, per process
	Processes    uint64 `json:"processes"`     // per sandbox user
	FileSize     uint64 `json:"file_size"`     // bytes, per file written
	OpenFiles    uint64 `json:"open_files"`
}

// DefaultLimits suit compiling and testing small programs.
var DefaultLimits = Limits{CPUSeconds: 300, AddressSpace: 8 << 30, Processes: 256, FileSize: 256 << 20, OpenFiles: 1024}

// Home is where the workspace appears inside a namespaced sandbox.
const Home = "/home/agent"

// initEnv carries the child's configuration into the re-executed binary.
const initEnv = "JSPARK_SANDBOX_INIT"

// childConfig is what the re-executed binary needs to confine itself before
// it becomes the shell.
type childConfig struct {
	Namespaces bool     `json:"namespaces"`
	Tree       bool     `json:"tree"`      // descriptor 3 is a detached mount of the workspace
	Workspace  string   `json:"workspace"` // host path, bound when there is no tree
	Limits     Limits   `json:"limits"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
}

// The sandbox re-executes the running binary (/proc/self/exe, which needs no
// search permission on its directories) with initEnv set; this init turns that
// process into the confined shell before any other code of the program runs.
func init() {
	cfg, ok := os.LookupEnv(initEnv)
	if !ok {
		return
	}
	err := childMain(cfg)
	fmt.Fprintf(os.Stderr, "jspark sandbox: %v\n", err)
	os.Exit(126)
}

// workspaceFD is the descriptor the workspace directory arrives on.
const workspaceFD = 3

func childMain(raw string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	if c.Namespaces {
		if err := confine(c); err != nil {
			return err
		}
		if err := unix.Chdir(Home); err != nil {
			return err
		}
	} else if err := unix.Fchdir(workspaceFD); err != nil {
		return err
	}
	unix.Close(workspaceFD)
	for _, l := range []struct {
		res int
		v   uint64
	}{
		{unix.RLIMIT_CPU, c.Limits.CPUSeconds},
		{unix.RLIMIT_AS, c.Limits.AddressSpace},
		{unix.RLIMIT_NPROC, c.Limits.Processes},
		{unix.RLIMIT_FSIZE, c.Limits.FileSize},
		{unix.RLIMIT_NOFILE, c.Limits.OpenFiles},
	} {
		if l.v == 0 {
			continue
		}
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.v, Max: l.v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.res, err)
		}
	}
	return unix.Exec(c.Argv[0], c.Argv, c.Env)
}

// confine runs as root of fresh user, mount, pid and network namespaces: every
// mount becomes read-only, /tmp and /home become private tmpfs, the workspace
// is attached read-write at Home, and /proc shows only the sandbox's processes.
// The workspace comes as a detached mount made by the parent (open_tree), so
// its host path need not be searchable by the sandbox's uid; a parent without
// the privilege for that passes the path instead.
func confine(c childConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	points, err := mountPoints()
	if err != nil {
		return err
	}
	for _, p := range points {
		err := remountReadOnly(p)
		if err != nil && p == "/" {
			return fmt.Errorf("remount / read-only: %w", err)
		}
	}
	for _, dir := range []string{"/tmp", "/home"} {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=256m,mode=1777"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", dir, err)
		}
	}
	if err := os.Mkdir(Home, 0o755); err != nil {
		return err
	}
	if c.Tree {
		if err := unix.MoveMount(workspaceFD, "", unix.AT_FDCWD, Home, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach workspace: %w", err)
		}
	} else if err := unix.Mount(c.Workspace, Home, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind workspace %s: %w", c.Workspace, err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// mountPoints lists the mount points of this namespace, parents first.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remountReadOnly adds MS_RDONLY to a bind remount, keeping the flags a user
// namespace may not drop (nosuid, nodev, noexec and the atime ones).
func remountReadOnly(p string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, m := range []struct{ st, ms int64 }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&m.st != 0 {
			flags |= uintptr(m.ms)
		}
	}
	return unix.Mount("", p, "", flags, "")
}

// hostUser is who a sandbox's processes run as on the host: as root, a
// dedicated uid per sandbox, so that rlimits on processes bind (root is exempt)
// and every process of the sandbox can be found by its uid; otherwise the
// caller's own uid (own < 0: not dedicated).
func hostUser() (uid int, dedicated bool) {
	if os.Getuid() != 0 {
		return os.Getuid(), false
	}
	return 200000 + (os.Getpid()%1000)*1000 + int(nextUID.Add(1)%1000), true
}

var nextUID atomic.Int64

// namespaces reports whether this kernel lets us create the sandbox's
// namespaces, probing once by starting a confined `true`.
var namespaces = sync.OnceValues(func() (bool, string) {
	uid, _ := hostUser()
	dir, err := os.MkdirTemp("", "jspark-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	os.Chown(dir, uid, uid)
	cmd, err := childCommand(dir, childConfig{Namespaces: true, Argv: []string{"/bin/sh", "-c", "exit 0"}}, uid)
	if err != nil {
		return false, err.Error()
	}
	out, err := cmd.CombinedOutput()
	cmd.ExtraFiles[0].Close()
	if err != nil {
		return false, fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return true, ""
})

// childCommand builds the re-execution of this binary that confines itself and
// becomes c.Argv, running as host uid, with the workspace dir as descriptor 3
// (the caller closes cmd.ExtraFiles[0] once the child has started).
func childCommand(workspace string, c childConfig, uid int) (*exec.Cmd, error) {
	var ws *os.File
	c.Workspace = workspace
	if c.Namespaces {
		if fd, err := unix.OpenTree(unix.AT_FDCWD, workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err == nil {
			ws, c.Tree = os.NewFile(uintptr(fd), workspace), true
		}
	}
	if ws == nil {
		var err error
		if ws, err = os.Open(workspace); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(c)
	if err != nil {
		ws.Close()
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{initEnv + "=" + string(raw)}
	cmd.ExtraFiles = []*os.File{ws}
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if c.Namespaces {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		// Entering a user namespace does not change credentials: become its
		// root, which the map makes the sandbox's host uid.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	} else if os.Getuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}
