package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// boundUnsent sets TCP_NOTSENT_LOWAT on a TCP connection: the kernel then
// accepts a write only while fewer than n bytes wait unsent.
func boundUnsent(c net.Conn, n int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n) })
}
