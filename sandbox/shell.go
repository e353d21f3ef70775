package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// shell is a bash whose stdout and stderr are a PTY (so programs behave as in
// a terminal) and whose stdin is a pipe we write commands into. The shell
// reads each command verbatim into a variable and evals it, so no quoting or
// syntax error in it can desynchronise the stream; a marker with $? tells
// where its output ends.
type shell struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	master *os.File
	out    chan []byte   // PTY chunks; closed at EOF
	exited chan struct{} // closed once the process is reaped
	token  string
	seq    int
}

func (s *Sandbox) start() (*shell, error) {
	home := s.root
	if s.ns {
		home = Home
	}
	c := childConfig{
		Namespaces: s.ns,
		Limits:     s.limits,
		Argv:       []string{"/bin/bash", "--noprofile", "--norc"},
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
			"USER=agent", "TMPDIR=/tmp", "PAGER=cat", "GIT_PAGER=cat",
		},
	}
	cmd, err := childCommand(s.root, c, s.uid)
	if err != nil {
		return nil, err
	}
	master, tty, err := pty.Open()
	if err != nil {
		cmd.ExtraFiles[0].Close()
		return nil, err
	}
	defer tty.Close()
	defer cmd.ExtraFiles[0].Close()
	if t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil {
		t.Lflag &^= unix.ECHO
		t.Oflag &^= unix.ONLCR
		unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, t)
	}
	pty.Setsize(master, &pty.Winsize{Rows: 50, Cols: 200})
	in, err := cmd.StdinPipe()
	if err != nil {
		master.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = tty, tty
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 1
	if err := cmd.Start(); err != nil {
		master.Close()
		return nil, fmt.Errorf("start sandbox shell: %w", err)
	}
	var tok [8]byte
	rand.Read(tok[:])
	sh := &shell{cmd: cmd, in: in, master: master, out: make(chan []byte, 64), exited: make(chan struct{}), token: hex.EncodeToString(tok[:])}
	go sh.read()
	go func() {
		cmd.Wait()
		close(sh.exited)
	}()
	return sh, nil
}

func (sh *shell) read() {
	defer close(sh.out)
	for {
		buf := make([]byte, 32<<10)
		n, err := sh.master.Read(buf)
		if n > 0 {
			sh.out <- buf[:n]
		}
		if err != nil {
			return
		}
	}
}

// drain drops what processes of the previous command wrote after its marker:
// they are killed by now, and their output is nobody's answer.
func (sh *shell) drain() {
	for {
		select {
		case _, ok := <-sh.out:
			if !ok {
				return
			}
		case <-time.After(5 * time.Millisecond):
			return
		}
	}
}

func (sh *shell) pid() int { return sh.cmd.Process.Pid }

func (sh *shell) kill() { sh.cmd.Process.Kill() }

// wait reaps the shell and stops reading its PTY.
func (sh *shell) wait() {
	<-sh.exited
	sh.in.Close()
	sh.master.Close()
	for range sh.out {
	}
}

// run sends one command and collects its output until its marker arrives,
// the shell dies, the timeout (then killAll(shell) and a grace period), or ctx.
func (sh *shell) run(ctx context.Context, command string, timeout time.Duration, limit int, killAll func(keep int)) (Result, error) {
	sh.drain()
	sh.seq++
	marker := []byte(fmt.Sprintf("\x1e%s:%d:", sh.token, sh.seq))
	// The shell reads the command itself (read -d '' stops at the NUL), so
	// running it needs no fork: a sandbox at its process limit still answers.
	line := fmt.Sprintf("IFS= read -r -d '' __cmd; eval \"$__cmd\" </dev/null; __rc=$?; printf '\\036%s:%d:%%d\\036' \"$__rc\"\n%s\x00",
		sh.token, sh.seq, strings.ReplaceAll(command, "\x00", ""))
	if _, err := io.WriteString(sh.in, line); err != nil {
		return Result{Output: "[the shell has exited]", ExitCode: -1, Restarted: true}, nil
	}
	c := capture{limit: limit}
	var pending []byte
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var res Result
	var grace <-chan time.Time
	for {
		if code, ok := findMarker(pending, marker); ok {
			c.write(pending[:bytes.Index(pending, marker)])
			res.ExitCode = code
			break
		}
		// Everything that cannot be the start of a marker is output.
		keep := min(len(pending), len(marker)+12)
		if i := bytes.Index(pending, marker); i >= 0 {
			keep = len(pending) - i
		}
		c.write(pending[:len(pending)-keep])
		pending = pending[len(pending)-keep:]

		select {
		case b, ok := <-sh.out:
			if !ok {
				c.write(pending)
				res.Restarted = true
				res.ExitCode = sh.exitCode()
				res.Output = c.String() + "\n[the shell exited; a new shell starts with the next command]"
				res.Truncated = c.cut()
				return res, nil
			}
			pending = append(pending, b...)
		case <-timer.C:
			res.TimedOut = true
			killAll(sh.pid())
			grace = time.After(waitGone)
		case <-grace:
			c.write(pending)
			res.Restarted = true
			res.ExitCode = 124
			res.Output = c.String() + fmt.Sprintf("\n[command timed out after %s; the shell was restarted]", timeout)
			res.Truncated = c.cut()
			return res, nil
		case <-ctx.Done():
			c.write(pending)
			res.Output, res.Truncated, res.Restarted = c.String(), c.cut(), true
			return res, ctx.Err()
		}
	}
	res.Output, res.Truncated = c.String(), c.cut()
	if res.TimedOut {
		res.ExitCode = 124
		res.Output += fmt.Sprintf("\n[command timed out after %s and was killed]", timeout)
	}
	return res, nil
}

// findMarker finds marker followed by an exit code and \x1e in b.
func findMarker(b, marker []byte) (code int, ok bool) {
	i := bytes.Index(b, marker)
	if i < 0 {
		return 0, false
	}
	tail := b[i+len(marker):]
	j := bytes.IndexByte(tail, 0x1e)
	if j < 0 {
		return 0, false
	}
	code, err := strconv.Atoi(string(tail[:j]))
	if err != nil {
		code = -1
	}
	return code, true
}

func (sh *shell) exitCode() int {
	<-sh.exited
	if ps := sh.cmd.ProcessState; ps != nil {
		return ps.ExitCode()
	}
	return -1
}

// capture keeps the first and last limit/2 bytes of a stream.
type capture struct {
	limit      int
	head, tail []byte
	total      int
}

func (c *capture) write(b []byte) {
	c.total += len(b)
	if room := c.limit/2 - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	c.tail = append(c.tail, b...)
	if keep := c.limit - c.limit/2; len(c.tail) > 2*keep+4096 {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

func (c *capture) cut() bool { return c.total > c.limit }

// String is the kept output as valid UTF-8, with a marker saying how much of
// the middle was dropped.
func (c *capture) String() string {
	keep := c.limit - c.limit/2
	tail := c.tail
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	s := string(c.head)
	if dropped := c.total - len(c.head) - len(tail); dropped > 0 {
		s += fmt.Sprintf("\n[... %d bytes of output truncated ...]\n", dropped)
	}
	s += string(tail)
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\r\n", "\n"), "\uFFFD")
}
