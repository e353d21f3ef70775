//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initEnv carries the child's configuration into the re-executed binary.
const initEnv = "JSPARK_SANDBOX_INIT"

// childConfig is what the re-executed binary needs to confine itself before
// it becomes the shell.
type childConfig struct {
	Namespaces bool     `json:"namespaces"`
	Tree       bool     `json:"tree"`      // workspaceFD is a detached mount of the workspace
	Workspace  string   `json:"workspace"` // host path, bound when there is no tree
	Limits     Limits   `json:"limits"`
	Listen     []int    `json:"listen"`   // loopback ports to listen on inside the network namespace
	Binds      []string `json:"binds"`    // host paths seen read-only at the same path (see buildRoot)
	BindFDs    []int    `json:"bind_fds"` // per bind: a read-only clone made by the parent, or -1 (bind by path)
	Landlock   int      `json:"landlock"` // the Landlock ABI to restrict with; 0: none
	Seccomp    bool     `json:"seccomp"`  // refuse new unix sockets (seccomp.go)
	Tmp        string   `json:"tmp"`      // without namespaces: the sandbox's temporary folder
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

// childMain waits for the parent's go-ahead (it places the process in the
// sandbox's cgroup first), confines itself, reports (with the listeners it
// opened) and becomes Argv. A failure is reported on syncFD as text.
func childMain(raw string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	// Landlock and no_new_privs bind the calling thread: this one execs.
	runtime.LockOSThread()
	var b [1]byte
	if n, err := unix.Read(syncFD, b[:]); n != 1 {
		return fmt.Errorf("no go-ahead from the parent: %v", err)
	}
	fds, err := setup(c)
	if err != nil {
		unix.Sendmsg(syncFD, []byte("error: "+err.Error()), nil, nil, 0)
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(syncFD, []byte("ok"), oob, nil, 0); err != nil {
		return fmt.Errorf("report to the parent: %w", err)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	unix.Close(syncFD)
	return unix.Exec(c.Argv[0], c.Argv, c.Env)
}

// setup does everything between the go-ahead and the exec; it returns the
// listening sockets it opened.
func setup(c childConfig) ([]int, error) {
	var fds []int
	if c.Namespaces {
		if err := confine(c); err != nil {
			return nil, err
		}
		if err := loopbackUp(); err != nil {
			return nil, err
		}
		for _, port := range c.Listen {
			fd, err := listenLoopback(port)
			if err != nil {
				return nil, err
			}
			fds = append(fds, fd)
		}
		if err := unix.Chdir(Home); err != nil {
			return nil, err
		}
	} else if err := unix.Fchdir(workspaceFD); err != nil {
		return nil, err
	}
	if c.Landlock > 0 {
		if err := restrictLandlock(c.Landlock, sandboxLandlock(c)); err != nil {
			return nil, err
		}
	}
	unix.Close(workspaceFD)
	if c.Seccomp {
		if err := denyUnixSockets(); err != nil {
			return nil, err
		}
	}
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
			return nil, fmt.Errorf("rlimit %d: %w", l.res, err)
		}
	}
	return fds, nil
}

// confine runs as root of fresh user, mount, pid and network namespaces: the
// process moves into a root built from an allowlist (buildRoot), with the
// workspace read-write at Home, a private /tmp and a /proc that shows only the
// sandbox's processes. The workspace comes as a detached mount made by the
// parent (open_tree), so its host path need not be searchable by the
// sandbox's uid; a parent without the privilege for that passes the path
// instead.
func confine(c childConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	return buildRoot(c)
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

// namespaces reports whether this kernel lets us create the sandbox's
// namespaces, probing once by starting a confined `true`.
var namespaces = sync.OnceValues(func() (bool, string) {
	id, err := allocUID()
	if err != nil {
		return false, err.Error()
	}
	defer id.release()
	dir, err := os.MkdirTemp("", "jspark-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	os.Chown(dir, id.uid, id.uid)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err.Error()
	}
	defer unix.Close(fd)
	cmd, sync, err := childCommand(fd, dir, childConfig{Namespaces: true, Argv: []string{"/bin/sh", "-c", "exit 0"}}, id.uid, nil)
	if err != nil {
		return false, err.Error()
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		sync.Close()
		return false, err.Error()
	}
	closeChildFiles(cmd, nil)
	_, err = handshake(context.Background(), sync, 0)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return false, strings.TrimSpace(fmt.Sprintf("%v %s", err, out.String()))
	}
	return true, ""
})

// childCommand builds the re-execution of this binary that confines itself and
// becomes c.Argv, running as host uid: the workspace (wsFD, a directory or a
// mount; wsPath is its folder, bound by path where no detached clone can be
// made) is its descriptor 3, one end of a socket pair its descriptor 4 (the
// other end is returned), and extra follow from descriptor 5. Once the child
// has started, the caller closes the child's copies (closeChildFiles) and
// runs the handshake.
func childCommand(wsFD int, wsPath string, c childConfig, uid int, extra []*os.File) (*exec.Cmd, *os.File, error) {
	var ws *os.File
	c.Workspace = wsPath
	if c.Namespaces {
		if fd, err := unix.OpenTree(wsFD, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE); err == nil {
			ws, c.Tree = os.NewFile(uintptr(fd), wsPath), true
		} else if wsPath == "" {
			return nil, nil, fmt.Errorf("clone the workspace mount: %w", err)
		}
	}
	if ws == nil {
		fd, err := unix.Dup(wsFD)
		if err != nil {
			return nil, nil, err
		}
		unix.CloseOnExec(fd)
		ws = os.NewFile(uintptr(fd), wsPath)
	}
	// Read-only binds are cloned here where this process may: the sandbox's
	// uid may not be able to reach them (a pyenv under /root).
	var binds []*os.File
	c.BindFDs = nil
	for _, p := range c.Binds {
		fd := -1
		if c.Namespaces {
			if f, err := cloneReadOnly(p); err == nil {
				fd = 5 + len(extra) + len(binds)
				binds = append(binds, f)
			}
		}
		c.BindFDs = append(c.BindFDs, fd)
	}
	closeBinds := func() {
		for _, f := range binds {
			f.Close()
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		ws.Close()
		closeBinds()
		return nil, nil, err
	}
	parent, child := os.NewFile(uintptr(pair[0]), "sandbox-sync"), os.NewFile(uintptr(pair[1]), "sandbox-sync-child")
	raw, err := json.Marshal(c)
	if err != nil {
		ws.Close()
		parent.Close()
		child.Close()
		closeBinds()
		return nil, nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{initEnv + "=" + string(raw)}
	cmd.ExtraFiles = append(append([]*os.File{ws, child}, extra...), binds...)
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
	return cmd, parent, nil
}

// closeChildFiles closes the parent's copies of what the child was given but
// the caller's extra files: the workspace descriptor, the child's socket end
// and the read-only clones.
func closeChildFiles(cmd *exec.Cmd, extra []*os.File) {
	for i, f := range cmd.ExtraFiles {
		if i < 2 || i >= 2+len(extra) {
			f.Close()
		}
	}
}

// handshakeWait bounds a child's start (confining itself is a few mounts).
const handshakeWait = 30 * time.Second

// handshake gives the started child its go-ahead and waits for its report:
// the listening sockets it opened (want of them), or its error.
func handshake(ctx context.Context, f *os.File, want int) ([]*os.File, error) {
	defer f.Close()
	fc, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	conn := fc.(*net.UnixConn)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(handshakeWait))
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("sandbox init: %w", err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*max(want, 1)))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("sandbox init: %w", err)
	}
	var files []*os.File
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "sandbox-listener"))
			}
		}
	}
	if msg := string(buf[:n]); msg != "ok" {
		for _, f := range files {
			f.Close()
		}
		if msg == "" {
			return nil, errors.New("sandbox init exited before it was ready")
		}
		return nil, fmt.Errorf("sandbox init: %s", strings.TrimPrefix(msg, "error: "))
	}
	if len(files) != want {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("sandbox init sent %d listeners, want %d", len(files), want)
	}
	return files, nil
}
