//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// hostSandbox makes a sandbox without namespaces.
func hostSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "ws"), nil, Options{NoNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Without namespaces a host unix socket accepted the sandbox's connections
// although Landlock was on (it does not govern connect on a pathname
// socket). No unix socket can be made there now but a connected stream
// pair, so none reaches the host's: not by socket(2), not with a family
// whose upper bits are set (the kernel reads an int), not by re-connecting
// a datagram pair.
func TestWithoutNamespacesHostUnixSocketRefusesTheSandbox(t *testing.T) {
	if note := seccompProbe(); note != "" {
		lacks(t, "seccomp %s", note)
	}
	s := hostSandbox(t)
	sock := filepath.Join(plant(t), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o777)
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	sysSocket := map[string]int{"amd64": 41, "arm64": 198}[runtime.GOARCH]
	script := fmt.Sprintf(`
import ctypes, socket, struct
path = %[1]q
def attempt(name, f):
    try:
        f()
        print(name, "CONNECTED")
    except OSError as e:
        print(name, "refused", e.errno)
def plain():
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path)
def high_bits():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(%[2]d), ctypes.c_long((1 << 32) | socket.AF_UNIX), ctypes.c_long(socket.SOCK_STREAM), ctypes.c_long(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    socket.socket(fileno=fd).connect(path)
def dgram_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.connect(path)
def stream_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.send(b"x")
    assert b.recv(1) == b"x"
    print("stream pair works")
for name, f in [("plain", plain), ("high-bits", high_bits), ("dgram-pair", dgram_pair)]:
    attempt(name, f)
stream_pair()
`, sock, sysSocket)
	if err := s.WriteFile("probe.py", []byte(script)); err != nil {
		t.Fatal(err)
	}
	r := run(t, s, "python3 < probe.py", 20*time.Second)
	want := "plain refused 13\nhigh-bits refused 13\ndgram-pair refused 13\nstream pair works\n"
	if r.Output != want {
		t.Errorf("the sandbox and the host's socket:\n%s\nwant\n%s", r.Output, want)
	}
	select {
	case <-accepted:
		t.Errorf("the host accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
	if iso := s.Isolation(); iso.Seccomp != seccompOn || !strings.Contains(strings.Join(iso.Warnings, "\n"), "no host socket is reachable") {
		t.Errorf("Isolation: %+v", iso)
	}
}

// Without namespaces the host's /tmp (other sandboxes' and jspark's files)
// was open to the sandbox: it has a temporary folder of its own instead.
func TestWithoutNamespacesHostTmpIsHidden(t *testing.T) {
	if abi, why := landlockProbe(); abi == 0 {
		lacks(t, "Landlock %s: without namespaces the host's /tmp is open to the sandbox's uid", why)
	}
	host, err := os.MkdirTemp("/tmp", "jspark-host-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(host)
	os.Chmod(host, 0o755)
	os.WriteFile(filepath.Join(host, "secret"), []byte("SECRET\n"), 0o644)
	s := hostSandbox(t)
	r := run(t, s, fmt.Sprintf("cat %[1]q/secret || echo REFUSED; touch /tmp/jspark-new-$$ 2>/dev/null && echo WROTE; f=$(mktemp) && echo tmp > $f && cat $f && case $f in $TMPDIR/*) echo PRIVATE;; esac", host), 10*time.Second)
	if r.Output != "REFUSED\ntmp\nPRIVATE\n" && !strings.HasSuffix(r.Output, "REFUSED\ntmp\nPRIVATE\n") {
		t.Errorf("the host's /tmp from a sandbox without namespaces: %q", r.Output)
	}
	tmp := s.tmp
	s.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the sandbox's temporary folder after Close: %v", err)
	}
}

// The filter, run by x/net/bpf's machine on seccomp_data as it reads it
// (each word big-endian; the kernel reads them in the machine's order).
func TestUnixSocketFilter(t *testing.T) {
	if seccompArch == 0 {
		lacks(t, "no filter for %s", runtime.GOARCH)
	}
	vm, err := bpf.NewVM(unixSocketFilter())
	if err != nil {
		t.Fatal(err)
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		kill  = unix.SECCOMP_RET_KILL_PROCESS
		deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		nosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	for _, c := range []struct {
		name       string
		arch, nr   uint32
		arg0, arg1 uint64
		want       uint32
	}{
		{"inet socket", seccompArch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, allow},
		{"unix socket", seccompArch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, deny},
		{"unix socket, upper bits set", seccompArch, unix.SYS_SOCKET, 1<<32 | unix.AF_UNIX, unix.SOCK_STREAM, deny},
		{"unix stream pair", seccompArch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, allow},
		{"unix seqpacket pair", seccompArch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_SEQPACKET, allow},
		{"unix datagram pair", seccompArch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK, deny},
		{"unix raw pair", seccompArch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_RAW, deny},
		{"io_uring", seccompArch, unix.SYS_IO_URING_SETUP, 8, 0, nosys},
		{"connect", seccompArch, unix.SYS_CONNECT, 3, 0, allow},
		{"another ABI", 0x40000003, unix.SYS_SOCKET, unix.AF_INET, 0, kill},
		{"x32", seccompArch, x32Bit | 41, unix.AF_UNIX, 0, kill},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := make([]byte, 64)
			binary.BigEndian.PutUint32(data[0:], c.nr)
			binary.BigEndian.PutUint32(data[4:], c.arch)
			binary.BigEndian.PutUint32(data[seccompArg0:], uint32(c.arg0))
			binary.BigEndian.PutUint32(data[seccompArg0+4:], uint32(c.arg0>>32))
			binary.BigEndian.PutUint32(data[seccompArg1:], uint32(c.arg1))
			got, err := vm.Run(data)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != c.want {
				t.Errorf("got %#x, want %#x", got, c.want)
			}
		})
	}
}
