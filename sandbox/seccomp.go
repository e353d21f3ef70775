//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Without namespaces a host unix socket is reachable by its path: Landlock
// (up to ABI 7 at least) does not govern connect(2) on a pathname socket.
// So in that mode the init installs a seccomp filter before it becomes the
// shell: no AF_UNIX socket can be made (socket(2)) but a connected pair of
// stream or seqpacket sockets (socketpair(2): Node and Python use them for
// their children's pipes; a datagram pair could be re-connected to a path),
// and io_uring, which makes sockets and connects without those calls, is
// absent. What no new socket can do, no connect on one can: the filter needs
// no look at connect's address (which seccomp cannot read).
//
// NOTE: the program is written by hand over golang.org/x/net/bpf rather
// than with elastic/go-seccomp-bpf: that library compares an argument as 64
// bits, while the kernel reads socket's family as an int, so a family of
// 1<<32|AF_UNIX would pass its AF_UNIX rule. Here only the low 32 bits of
// an int argument are compared.

// seccompArch is the audit arch of the running binary's system calls (0: a
// port without a filter).
var seccompArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]

// seccompProbe says once whether this kernel takes seccomp filters: "" or
// why not.
var seccompProbe = sync.OnceValue(func() string {
	if seccompArch == 0 {
		return "no filter for " + runtime.GOARCH
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		return fmt.Sprintf("unavailable (PR_GET_SECCOMP: %v)", err)
	}
	return ""
})

// seccomp_data: nr at 0, arch at 4, args from 16, each 8 bytes (the low
// half first on the little-endian machines that have a filter here).
const (
	seccompNR   = 0
	seccompArg0 = 16
	seccompArg1 = 24
	x32Bit      = 0x40000000 // amd64's x32 system calls; none is that high on arm64
)

// unixSocketFilter is the program (see above).
func unixSocketFilter() []bpf.Instruction {
	kill := bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 4, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: seccompArch, SkipTrue: 1}, // another ABI (i386 on amd64) is killed
		/* 2 */ kill,
		/* 3 */ bpf.LoadAbsolute{Off: seccompNR, Size: 4},
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		/* 5 */ kill,
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKET, SkipTrue: 3}, // → 10
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKETPAIR, SkipTrue: 4}, // → 12
		/* 8 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IO_URING_SETUP, SkipTrue: 9}, // → 18
		/* 9 */ allow,
		// socket(family, ...)
		/* 10 */ bpf.LoadAbsolute{Off: seccompArg0, Size: 4},
		/* 11 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipTrue: 5, SkipFalse: 4}, // → 17, 16
		// socketpair(family, type, ...): a datagram pair (SOCK_DGRAM, or
		// SOCK_RAW, which AF_UNIX makes a datagram socket) has bit 1 set.
		/* 12 */ bpf.LoadAbsolute{Off: seccompArg0, Size: 4},
		/* 13 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipFalse: 2}, // → 16
		/* 14 */ bpf.LoadAbsolute{Off: seccompArg1, Size: 4},
		/* 15 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.SOCK_DGRAM, SkipTrue: 1}, // → 17
		/* 16 */ allow,
		/* 17 */ bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		/* 18 */ bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
}

// denyUnixSockets installs the filter on the calling thread (the caller
// holds its OS thread and executes from it), setting no_new_privs.
func denyUnixSockets() error {
	raw, err := bpf.Assemble(unixSocketFilter())
	if err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	runtime.KeepAlive(filter)
	return nil
}
