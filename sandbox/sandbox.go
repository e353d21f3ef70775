//go:build linux

package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox is one session's workspace and shell. Commands run one at a time.
type Sandbox struct {
	dir       string // the workspace's folder on disk
	root      string // where its files are while the sandbox is open (see Root)
	rootFD    int    // the workspace directory, which every host-side file access starts from
	tmpfs     bool   // the workspace is a tmpfs of limits.Workspace bytes, copied to dir (keep)
	keep      *mirror
	id        *uidLock
	uid       int
	dedicated bool
	ns        bool
	cg        *cgroup
	iso       Isolation
	limits    Limits
	binds     []string // host paths seen read-only (ReadOnly and program prefixes)
	tmp       string   // without namespaces: the sandbox's own temporary folder (TMPDIR)
	path      []string // folders added to the sandbox's PATH for programs found off it

	pathMu sync.Mutex // guards root, which Close moves; held only for that

	mu     sync.Mutex
	sh     *shell
	doors  []*door
	closed bool
}

var reportOnce sync.Once

// New makes the workspace (seeded with files: relative path → content) and
// prepares its shell; the shell starts with the first command. As root with
// namespaces the workspace is a tmpfs of Limits.Workspace bytes that Close
// copies into dir; otherwise it is dir itself.
func New(dir string, files map[string]string, o Options) (*Sandbox, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var binds []string
	for _, p := range o.ReadOnly {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("sandbox: read-only path %q is not absolute", p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("sandbox: read-only path: %w", err)
		}
		for _, own := range []string{Home, "/tmp", "/proc", "/dev"} {
			if real == "/" || inside(own, real) {
				return nil, fmt.Errorf("sandbox: read-only path %s would cover the sandbox's %s", p, own)
			}
		}
		binds = appendNew(binds, real)
	}
	progs, path := programBinds(append(append([]string{}, defaultPrograms...), o.Programs...))
	for _, p := range progs {
		binds = appendNew(binds, p)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	s := &Sandbox{dir: root, root: root, rootFD: -1, limits: o.Limits, binds: binds, path: path}
	if s.limits == (Limits{}) {
		s.limits = DefaultLimits
	}
	if err := s.open(o); err != nil {
		s.release()
		return nil, err
	}
	reportOnce.Do(func() {
		w := o.Log
		if w == nil {
			w = os.Stderr
		}
		fmt.Fprintf(w, "jspark sandbox: %s\n", s.iso.Mode())
		for _, warning := range s.iso.Warnings {
			fmt.Fprintf(w, "jspark sandbox: WARNING: %s\n", warning)
		}
	})
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.writeFile(n, []byte(files[n]), false); err != nil {
			s.Close()
			return nil, fmt.Errorf("seed file %q: %w", n, err)
		}
	}
	s.sync()
	return s, nil
}

// sync brings the copy of a capped workspace up to date (keep.go).
func (s *Sandbox) sync() {
	if s.keep != nil {
		s.keep.sync()
	}
}

// syncDue brings it up to date unless passes cost too much (keep.go).
func (s *Sandbox) syncDue() {
	if s.keep != nil {
		s.keep.syncDue()
	}
}

// Kept says what the copy of a capped workspace holds in its folder (as of
// the last command, or of Close); nil when the workspace is the folder
// itself.
func (s *Sandbox) Kept() *Kept {
	if s.keep == nil {
		return nil
	}
	k := s.keep.report()
	return &k
}

// open takes the sandbox's uid, cgroup and workspace, and says what is in force.
func (s *Sandbox) open(o Options) error {
	reapOnce.Do(func() {
		if r := reapDead(); r != (reaped{}) {
			s.iso.Warnings = append(s.iso.Warnings, r.String())
		}
	})
	var err error
	if s.id, err = allocUID(); err != nil {
		return err
	}
	s.uid, s.dedicated = s.id.uid, s.id.f != nil
	why := "disabled by --no-namespaces"
	if !o.NoNamespaces {
		s.ns, why = namespaces()
	}
	s.iso.Namespaces = s.ns
	s.iso.Landlock, s.iso.LandlockNote = landlockProbe()
	s.iso.ReadOnly = s.binds
	if s.ns {
		s.iso.Root = "allowlist (system directories, a curated /etc, the workspace, a private /tmp, the read-only binds)"
	} else if err := s.openHost(why); err != nil {
		return err
	}
	if setup, why := cgroups(); setup != nil {
		if s.cg, err = newCgroup(setup, s.limits); err != nil {
			return err
		}
		for _, dir := range s.cg.dirs {
			s.id.record("cgroup " + dir)
		}
		s.iso.Cgroup = setup.mode()
	} else {
		s.iso.Cgroup = "none"
		s.iso.Warnings = append(s.iso.Warnings, fmt.Sprintf("no cgroup for sandboxes (%s): memory and processes are bounded per process (rlimits), not per sandbox", why))
	}
	if s.ns && os.Getuid() == 0 && s.limits.Workspace > 0 {
		if s.rootFD, err = tmpfsWorkspace(s.limits.Workspace, s.uid); err != nil {
			return err
		}
		s.tmpfs = true
		s.root = fmt.Sprintf("/proc/self/fd/%d", s.rootFD)
		if s.keep, err = newMirror(s.rootFD, s.dir, s.limits.Workspace); err != nil {
			return err
		}
		s.iso.Workspace = fmt.Sprintf("tmpfs of %s (at most %d files), copied to its folder after every command", bytesText(s.limits.Workspace), workspaceInodes)
	} else {
		if s.dedicated {
			if err := chownTree(s.dir, s.uid); err != nil {
				return err
			}
		}
		if s.rootFD, err = unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		s.iso.Workspace = "host folder"
		if s.limits.Workspace > 0 {
			s.iso.Workspace += ", no size cap"
			s.iso.Warnings = append(s.iso.Warnings, "the workspace has no size cap (a capped workspace needs root and namespaces)")
		}
	}
	return nil
}

// release gives back what open took.
func (s *Sandbox) release() {
	s.keep.close()
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	if s.rootFD >= 0 {
		unix.Close(s.rootFD)
		s.rootFD = -1
	}
	s.cg.remove()
	s.id.release()
}

// Root is where the workspace's files are on the host: while the sandbox is
// open, its tmpfs (a /proc/self/fd path of this process) when the workspace
// is capped; after Close, and otherwise, its folder on disk.
func (s *Sandbox) Root() string {
	s.pathMu.Lock()
	defer s.pathMu.Unlock()
	return s.root
}

// Isolated reports whether commands run in their own namespaces.
func (s *Sandbox) Isolated() bool { return s.ns }

// Isolation says what confines this sandbox and what it lacks.
func (s *Sandbox) Isolation() Isolation { return s.iso }

// Path maps a workspace-relative path to its host path (see resolve).
func (s *Sandbox) Path(rel string) (string, error) { return resolve(s.Root(), rel) }

func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// Exec runs command in the session's shell (its cwd and variables persist
// between commands; processes it leaves behind do not), killing what it
// started after timeout and keeping at
// most limit bytes of output (head and tail). A cancelled ctx (the session
// cut) kills the shell and every process of the sandbox.
func (s *Sandbox) Exec(ctx context.Context, command string, timeout time.Duration, limit int) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Result{}, errClosed
	}
	if s.sh == nil {
		sh, err := s.start(ctx)
		if err != nil {
			return Result{}, err
		}
		s.sh = sh
	}
	res, err := s.sh.run(ctx, command, timeout, limit, s.sweep)
	defer s.syncDue() // nothing runs now to change the workspace
	if res.Restarted || err != nil {
		s.stopShell()
		return res, err
	}
	// Nothing a command started outlives it: a background job, daemon or fork
	// bomb is gone before the next command.
	s.sweep(s.sh.pid())
	return res, err
}

// Close kills the shell and every process the sandbox started, reaps them,
// and brings the copy of a capped workspace up to date (a file left out at
// the cap is in Kept, not an error).
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopShell()
	for _, d := range s.doors {
		d.Close()
	}
	var err error
	if s.tmpfs {
		s.sync()
		if k := s.Kept(); k.Error != "" {
			err = fmt.Errorf("copy the workspace out to %s: %s", s.dir, k.Error)
		}
		s.pathMu.Lock()
		s.root = s.dir
		s.pathMu.Unlock()
	}
	s.release()
	return err
}

// Restart ends the shell and every process of the sandbox; the next command
// starts a fresh shell in the workspace, with none of the old one's
// functions, variables or cwd (a task's check must not run through what the
// session defined).
func (s *Sandbox) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.stopShell()
	}
}

func (s *Sandbox) stopShell() {
	if s.sh == nil {
		return
	}
	s.sh.kill()
	s.sweep(0)
	s.sh.wait()
	s.sh = nil
}

// sweep kills every process of the sandbox but keep (see killAll).
func (s *Sandbox) sweep(keep int) {
	shell := 0
	if s.sh != nil {
		shell = s.sh.pid()
	}
	killAll(func() []int { return append(members(shell, s.uid, s.dedicated), s.cg.procs()...) }, keep)
}

// waitGone is how long a killed command's shell gets to report back before
// the shell itself is replaced.
const waitGone = 2 * time.Second

// child is one started init of the sandbox (a shell) and what it opened.
type child struct {
	cmd       *exec.Cmd
	listeners []net.Listener // one per door, inside the sandbox's network namespace
}

func (c *child) close() {
	for _, l := range c.listeners {
		l.Close()
	}
}

// spawn starts argv confined in the sandbox, with extra as its descriptors
// from controlFD on; prepare sets up the rest of cmd (stdio) before it starts.
func (s *Sandbox) spawn(ctx context.Context, argv []string, extra []*os.File, prepare func(*exec.Cmd)) (*child, error) {
	home := s.dir
	if s.ns {
		home = Home
	}
	c := childConfig{
		Namespaces: s.ns,
		Limits:     s.limits,
		Argv:       argv,
		Env: []string{
			"PATH=" + strings.Join(append(append([]string{}, sandboxPath...), s.path...), ":"), "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
			"USER=agent", "TMPDIR=" + cmp.Or(s.tmp, "/tmp"), "PAGER=cat", "GIT_PAGER=cat",
		},
	}
	if !s.ns {
		c.Tmp, c.Seccomp = s.tmp, s.iso.Seccomp == seccompOn
	}
	if s.ns {
		for _, d := range s.doors {
			c.Listen = append(c.Listen, d.addr.Port)
		}
	}
	c.Binds, c.Landlock = s.binds, s.iso.Landlock
	wsPath := s.dir
	if s.tmpfs {
		wsPath = "" // only the mount itself will do
	}
	cmd, sync, err := childCommand(s.rootFD, wsPath, c, s.uid, extra)
	if err != nil {
		return nil, err
	}
	prepare(cmd)
	if err := cmd.Start(); err != nil {
		closeChildFiles(cmd, extra)
		sync.Close()
		return nil, err
	}
	closeChildFiles(cmd, extra)
	ch := &child{cmd: cmd}
	if s.cg != nil {
		// Before the go-ahead: nothing runs outside the cgroup.
		if err := s.cg.add(cmd.Process.Pid); err != nil {
			sync.Close()
			cmd.Process.Kill()
			cmd.Wait()
			return nil, err
		}
	}
	files, err := handshake(ctx, sync, len(c.Listen))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	for i, f := range files {
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			ch.close()
			cmd.Process.Kill()
			cmd.Wait()
			return nil, err
		}
		ch.listeners = append(ch.listeners, l)
		go s.doors[i].serve(l)
	}
	return ch, nil
}
