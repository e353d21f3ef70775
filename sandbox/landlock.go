//go:build linux

package sandbox

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is the second layer under the sandbox's root: where the kernel has
// it (ABI 2 or later: ABI 1 refuses every rename across folders), the init
// restricts itself, and so every process of the sandbox, to read and execute
// on the allowlisted paths, read and write on the workspace, /tmp and
// /dev/shm, and device use on /dev; nothing else, whatever a mount shows. It
// also applies without namespaces, where it is the only thing between the
// sandbox and the host's files.

// landlockMinABI is the oldest ABI used (REFER, for renames across folders).
const landlockMinABI = 2

// landlockProbe asks the kernel for its Landlock ABI once: the ABI, or 0 and
// why it is not used.
var landlockProbe = sync.OnceValues(func() (int, string) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Sprintf("unavailable (ABI probe: %s)", unix.ErrnoName(errno))
	}
	if abi < landlockMinABI {
		return 0, fmt.Sprintf("unavailable (ABI %d lacks REFER: renames across folders would fail)", abi)
	}
	return int(abi), ""
})

// landlockRuleset is struct landlock_ruleset_attr as of ABI 6; its size is
// cut to what the ABI knows.
type landlockRuleset struct {
	handledFS, handledNet, scoped uint64
}

// landlockRights are the file-system rights an ABI handles.
func landlockRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER)
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// landlockPaths are the rules: paths by what they allow.
type landlockPaths struct {
	list  []string // read folders (names only)
	read  []string // read and execute
	write []string // everything
	dev   []string // read, write, truncate and ioctl on devices
	fds   []int    // open files whose inode gets read and write (the terminal: /dev/stdout reopens it)
	dirs  []int    // open folders that get everything (a workspace whose path the sandbox's uid may not search)
}

// restrictLandlock confines this thread and what it executes to paths.
// The caller holds its OS thread (Landlock binds the calling thread) and
// executes from it.
func restrictLandlock(abi int, paths landlockPaths) error {
	handled := landlockRights(abi)
	attr := landlockRuleset{handledFS: handled}
	size := unsafe.Sizeof(attr.handledFS)
	if abi >= 6 {
		// Signals and abstract unix sockets reach only the sandbox's own processes.
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	fileRights := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE|unix.LANDLOCK_ACCESS_FS_READ_FILE|
		unix.LANDLOCK_ACCESS_FS_TRUNCATE|unix.LANDLOCK_ACCESS_FS_IOCTL_DEV) & handled
	read := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR)
	dev := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE|unix.LANDLOCK_ACCESS_FS_READ_DIR|
		unix.LANDLOCK_ACCESS_FS_TRUNCATE|unix.LANDLOCK_ACCESS_FS_IOCTL_DEV) & handled
	add := func(fd int, allowed uint64) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			allowed &= fileRights // a file's rule may hold only file rights
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: allowed, Parent_fd: int32(fd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return errno
		}
		return nil
	}
	for _, set := range []struct {
		paths   []string
		allowed uint64
	}{{paths.list, unix.LANDLOCK_ACCESS_FS_READ_DIR}, {paths.read, read}, {paths.write, handled}, {paths.dev, dev}} {
		for _, p := range set.paths {
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // an allowlisted path this host lacks
			}
			err = add(fd, set.allowed)
			unix.Close(fd)
			if err != nil {
				return fmt.Errorf("landlock rule for %s: %w", p, err)
			}
		}
	}
	for _, fd := range paths.fds {
		add(fd, fileRights) // a pipe has no path to hold a rule; it needs none
	}
	for _, fd := range paths.dirs {
		if err := add(fd, handled); err != nil {
			return fmt.Errorf("landlock rule for descriptor %d: %w", fd, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict: %w", errno)
	}
	return nil
}

// sandboxLandlock is the ruleset of a sandbox: inside a namespaced root the
// root's own paths, else the host's allowlisted paths, the binds, and the
// workspace folder.
func sandboxLandlock(c childConfig) landlockPaths {
	var p landlockPaths
	p.read = append(p.read, systemDirs...)
	p.read = append(p.read, c.Binds...)
	p.read = append(p.read, "/proc")
	if c.Namespaces {
		p.list = []string{"/"}
		p.read = append(p.read, "/etc") // the root's /etc holds only etcEntries
		p.write = []string{Home, "/tmp", "/dev/shm"}
		p.dev = []string{"/dev"}
	} else {
		for _, e := range etcEntries {
			p.read = append(p.read, "/etc/"+e)
		}
		// The workspace by its descriptor: a rule by path would need the
		// sandbox's uid to search every folder above it. Not the host's /tmp.
		p.write = []string{c.Tmp, "/dev/shm"}
		p.dirs = []int{workspaceFD}
		for _, n := range devNodes {
			p.dev = append(p.dev, "/dev/"+n)
		}
		p.dev = append(p.dev, "/dev/pts", "/dev/ptmx")
	}
	p.fds = []int{0, 1, 2, ttyFD}
	return p
}
