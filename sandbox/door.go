//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// doorPortBase is where Listen(0) numbers its ports inside a namespaced
// sandbox (whose network namespace is its own, so no host port is taken).
const doorPortBase = 40000

// maxDoorConns bounds the connections open through one door at a time: a
// sandbox cannot make the host hold more.
const maxDoorConns = 64

// Listen opens a door from the sandbox to the host: every TCP connection a
// sandboxed process opens to the returned listener's Addr (127.0.0.1:port as
// the sandbox sees it) is accepted by that listener, on the host, for the
// sandbox's whole life (shell restarts included). The caller serves it, e.g.
// http.Serve(l, handler); the sandbox gains that service and nothing else of
// the host's network.
//
// With namespaces the socket is created inside the sandbox's own network
// namespace (by the sandbox's init, before the shell starts, and handed to the
// host over a socket pair); port 0 picks one from 40000 up. Without
// namespaces it is a host loopback listener (port 0: any free port). Listen
// must come before the first command; Close closes the door.
func (s *Sandbox) Listen(port int) (net.Listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, errClosed
	case s.sh != nil:
		return nil, errors.New("sandbox: Listen must come before the first command")
	case port < 0 || port > 65535:
		return nil, fmt.Errorf("sandbox: port %d out of range", port)
	}
	d := &door{conns: make(chan net.Conn), done: make(chan struct{}), slots: make(chan struct{}, maxDoorConns)}
	if !s.ns {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, err
		}
		d.addr = l.Addr().(*net.TCPAddr)
		d.host = l
		go d.serve(l)
	} else {
		if port == 0 {
			port = doorPortBase + len(s.doors)
		}
		for _, o := range s.doors {
			if o.addr.Port == port {
				return nil, fmt.Errorf("sandbox: port %d is already a door", port)
			}
		}
		d.addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	}
	s.doors = append(s.doors, d)
	return d, nil
}

// door is one Listen: its address inside the sandbox and the connections
// that arrive there from every shell the sandbox starts.
type door struct {
	addr  *net.TCPAddr
	host  net.Listener // without namespaces: the one listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	slots chan struct{}
}

func (d *door) Addr() net.Addr { return d.addr }

func (d *door) Accept() (net.Conn, error) {
	select {
	case c := <-d.conns:
		return c, nil
	case <-d.done:
		return nil, net.ErrClosed
	}
}

func (d *door) Close() error {
	d.once.Do(func() {
		close(d.done)
		if d.host != nil {
			d.host.Close()
		}
	})
	return nil
}

// serve accepts from one listener (one shell's, or the host's) until it or
// the door closes, holding at most maxDoorConns connections open.
func (d *door) serve(l net.Listener) {
	go func() {
		<-d.done
		l.Close()
	}()
	for {
		select {
		case d.slots <- struct{}{}:
		case <-d.done:
			return
		}
		c, err := l.Accept()
		if err != nil {
			<-d.slots
			return
		}
		select {
		case d.conns <- &doorConn{Conn: c, release: func() { <-d.slots }}:
		case <-d.done:
			c.Close()
			<-d.slots
			return
		}
	}
}

// doorConn gives its slot back when closed.
type doorConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *doorConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// loopbackUp brings up lo in the sandbox's fresh network namespace (it starts
// down): the sandbox's processes may talk to each other, and doors listen there.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	return nil
}

// listenLoopback opens a listening TCP socket on 127.0.0.1:port.
func listenLoopback(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("door on port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("door on port %d: %w", port, err)
	}
	return fd, nil
}
