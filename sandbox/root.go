//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The root of a namespaced sandbox is built from an allowlist, never the host's
// root made read-only: a fresh tmpfs (read-only once built) that holds
//
//   - systemDirs, bound read-only where they exist (a symlink such as
//     /bin -> usr/bin stays a symlink);
//   - /etc with only etcEntries, bound read-only;
//   - /dev with devNodes bound from the host, a private devpts (ptmx) and a
//     private /dev/shm;
//   - a fresh /proc of the sandbox's pid namespace and a private /tmp;
//   - the workspace at Home;
//   - the read-only binds (childConfig.Binds): Options.ReadOnly and the
//     install prefixes of the programs the tasks need (see programBinds),
//     each at its host path.
//
// Nothing else of the host is there: no /root, /home, /run, /var/run, /srv,
// /mnt, /opt, no project directory or other workspace, so no host unix socket
// is even visible.

// systemDirs are bound read-only where they exist.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are what programs read from /etc: users and groups by name
// (passwd and group hold no password hashes), name service and resolver
// configuration, the dynamic loader's cache, time zone, alternatives, CA
// certificates, shell start-up files, MIME and magic databases, Python's
// site configuration.
//
// NOTE: left out on purpose: shadow, gshadow and their backups, sudoers,
// ssh (host keys), ssl/private, npmrc and pip.conf (registry tokens live
// there), machine-id, subuid/subgid, pam, cron, everything of services that
// run on the host (postgresql, apache2, ...).
var etcEntries = []string{
	"passwd", "group", "hosts", "hostname", "nsswitch.conf", "host.conf", "gai.conf", "resolv.conf",
	"protocols", "services", "networks",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "alternatives",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
	"bash.bashrc", "profile", "profile.d", "inputrc", "environment", "shells", "terminfo",
	"mime.types", "magic", "magic.mime", "os-release", "debian_version", "lsb-release",
	"locale.alias", "gitconfig", "mtab",
	"python3", "python3.8", "python3.9", "python3.10", "python3.11", "python3.12", "python3.13", "python3.14",
}

// devNodes are the host devices a sandbox gets (bound, as a user namespace may
// not make device nodes).
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are /dev's usual symlinks.
var devLinks = [][2]string{{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"}}

// oldRoot is where the host's root is while the sandbox's root is built.
const oldRoot = "/.host"

// defaultPrograms are what every recipe's tasks run.
var defaultPrograms = []string{"python3", "bash"}

// sandboxPath is the PATH a sandbox starts with.
var sandboxPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// buildRoot makes the sandbox's root and enters it (pivot_root), in a mount
// namespace of its own whose mounts are private. The host's root is reachable
// only while this runs.
func buildRoot(c childConfig) error {
	// The new root is a tmpfs on /tmp: binds from the host's /tmp still come
	// from oldRoot/tmp after the pivot, as the tmpfs is no longer over it there.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=8m,mode=0755"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	if err := os.Mkdir("/tmp"+oldRoot, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot("/tmp", "/tmp"+oldRoot); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	for _, d := range systemDirs {
		if err := bindHost(d, true); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/etc", 0o755); err != nil {
		return err
	}
	for _, e := range etcEntries {
		if err := bindHost("/etc/"+e, true); err != nil {
			return err
		}
	}
	if err := buildDev(); err != nil {
		return err
	}
	for _, dir := range []string{"/tmp", "/proc", Home, "/var"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := os.Symlink("/tmp", "/var/tmp"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=256m,mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on /tmp: %w", err)
	}
	if c.Tree {
		if err := unix.MoveMount(workspaceFD, "", unix.AT_FDCWD, Home, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach workspace: %w", err)
		}
	} else if err := unix.Mount(oldRoot+c.Workspace, Home, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind workspace %s: %w", c.Workspace, err)
	}
	// After /tmp and Home: a bind below them (an agent cached under /tmp)
	// lands on their mounts, not under them.
	for i, p := range c.Binds {
		var err error
		if i < len(c.BindFDs) && c.BindFDs[i] >= 0 {
			err = attachBind(c.BindFDs[i], p)
			unix.Close(c.BindFDs[i])
		} else {
			err = bindHost(p, false)
		}
		if err != nil {
			return err
		}
	}
	// A fresh proc needs a fully visible one in the namespace: the host's is
	// still there under oldRoot.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Unmount(oldRoot, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := os.Remove(oldRoot); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount the root read-only: %w", err)
	}
	return nil
}

// bindHost puts the host's p (a directory, a file or a symlink) at p in the new
// root, read-only, making the folders above it; a missing p is skipped when
// optional. A symlink is copied as a symlink (it resolves inside the sandbox).
func bindHost(p string, optional bool) error {
	src := oldRoot + p
	fi, err := os.Lstat(src)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read-only %s: %w", p, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, p)
	}
	if err := makeTarget(p, fi.IsDir()); err != nil {
		return err
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("clone %s: %w", p, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", p, err)
	}
	return nil
}

// makeTarget makes an empty directory or file at p to mount on, and the
// folders above it.
func makeTarget(p string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// attachBind attaches a read-only clone the parent made of the host's p (its
// folders above may be closed to the sandbox's uid, e.g. a pyenv under /root).
func attachBind(fd int, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := makeTarget(p, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", p, err)
	}
	return nil
}

// cloneReadOnly makes a detached, read-only, recursive clone of the mount
// tree at p (it needs the privilege to clone mounts; the caller falls back to
// a bind by path inside the sandbox).
func cloneReadOnly(p string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, err
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// buildDev makes a minimal /dev: devNodes bound from the host, a private
// devpts for programs that open terminals of their own, a private /dev/shm.
// The shell's own terminal is the host's PTY it was given, not a node here.
func buildDev() error {
	if err := os.Mkdir("/dev", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on /dev: %w", err)
	}
	for _, n := range devNodes {
		p := "/dev/" + n
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount(oldRoot+p, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[1], "/dev/"+l[0]); err != nil {
			return err
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on /dev/shm: %w", err)
	}
	return nil
}

// programBinds resolves each program (a name looked up on the sandbox's PATH,
// then on jspark's own PATH skipping version-manager shims, then through such
// a shim; or an absolute path) through its links and returns the install prefixes that lie outside
// systemDirs (a pyenv under /root, a Node under /opt: the folder above its
// bin/) and the folders to add to the sandbox's PATH for programs found only
// on jspark's. A program found nowhere is left out: the task that runs it
// fails as it would on the host.
func programBinds(programs []string) (binds, path []string) {
	for _, name := range programs {
		found := name
		if !filepath.IsAbs(name) {
			found = lookPath(name, sandboxPath)
			if found == "" {
				found = lookPath(name, hostPath())
			}
			if found == "" {
				found = shimTarget(name)
			}
			if found == "" {
				continue
			}
		}
		real, err := filepath.EvalSymlinks(found)
		if err != nil {
			continue
		}
		if !underSystemDirs(real) {
			prefix := filepath.Dir(real)
			if b := filepath.Base(prefix); (b == "bin" || b == "sbin") && !broad(filepath.Dir(prefix)) {
				prefix = filepath.Dir(prefix)
			}
			if broad(prefix) {
				continue
			}
			binds = appendNew(binds, prefix)
		}
		// A program found off the sandbox's PATH gets its folder added, as
		// the sandbox sees it.
		if dir := filepath.Dir(found); !contains(sandboxPath, dir) {
			if !underSystemDirs(dir) && !withinAny(dir, binds) {
				dir = filepath.Dir(real)
			}
			path = appendNew(path, dir)
		}
	}
	return binds, path
}

// broad says whether binding dir would show too much of the host: the root,
// a top-level folder (/opt, /root), a home directory.
func broad(dir string) bool {
	if strings.Count(dir, "/") < 2 || filepath.Dir(dir) == "/home" {
		return true
	}
	home, err := os.UserHomeDir()
	return err == nil && dir == home
}

// hostPath is jspark's PATH without version-manager shims (scripts that need
// the manager's state and environment, not programs).
func hostPath() []string {
	var out []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) && filepath.Base(d) != "shims" {
			out = append(out, d)
		}
	}
	return out
}

// shimTarget finds the interpreter a pyenv-style shim on jspark's PATH runs
// (a Python found only that way): the shim itself is a script that needs the
// manager's state, so the interpreter says where it is. Asked once per name.
func shimTarget(name string) string {
	if !strings.HasPrefix(name, "python") {
		return ""
	}
	shimMu.Lock()
	defer shimMu.Unlock()
	if p, ok := shims[name]; ok {
		return p
	}
	shims[name] = ""
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(exe) {
		shims[name] = exe
	}
	return shims[name]
}

var (
	shimMu sync.Mutex
	shims  = map[string]string{}
)

func lookPath(name string, dirs []string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// underSystemDirs says whether the real path p is inside the root's system
// directories (resolved, as /bin may be a link to usr/bin).
func underSystemDirs(p string) bool {
	for _, d := range systemDirs {
		if r, err := filepath.EvalSymlinks(d); err == nil && inside(p, r) {
			return true
		}
	}
	return false
}

func inside(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func withinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if inside(p, d) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}
