//go:build !linux

package server

import "net"

// boundUnsent leaves c's buffers to the system where TCP_NOTSENT_LOWAT is
// not known to bound writes: the engine's window still pauses a stream
// once the kernel's buffers are full.
func boundUnsent(c net.Conn, n int) {}
