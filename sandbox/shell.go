//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// shell is a bash whose terminal is a PTY (so programs behave as in a
// terminal) and whose stdin is a pipe we write commands into. The shell reads
// each command verbatim into a variable and evals it, so no quoting or syntax
// error in it can desynchronise the stream.
//
// The end of a command does not depend on anything the command controls: the
// eval runs with its stdin, stdout and stderr given by the wrapper (restored
// afterwards, even after `exec >log 2>&1`), and the wrapper then writes the
// marker with $? twice, on a control pipe (which the command never sees) and
// on the PTY (so the host knows the output before it has been read). A
// command that mangles the terminal still ends at its control marker.
type shell struct {
	cmd    *exec.Cmd
	in     *os.File      // the shell's stdin: commands
	master *os.File      // the PTY's master: output
	tty    *os.File      // the PTY's slave, kept to reset its modes before each command
	term   *unix.Termios // the modes every command starts with
	out    chan []byte   // PTY chunks; closed when the master is closed
	ctl    chan []byte   // control pipe chunks; closed at EOF
	exited chan struct{} // closed once the process is reaped
	token  string
	seq    int
	box    *child // the started init: its process and listeners
}

// The descriptors the init and the shell find their channels on.
const (
	workspaceFD = 3 // the workspace directory or a detached mount of it; closed before exec
	syncFD      = 4 // a socket to the parent: the go-ahead in, listeners out; closed before exec
	controlFD   = 5 // the control pipe's write end; bash keeps it
	ttyFD       = 6 // a copy of the PTY's slave; bash keeps it for each command's stdout and stderr
)

// maxCommand bounds one command's text: bash reads it a byte at a time.
const maxCommand = 1 << 20

// settleOutput is how long the PTY marker may lag the control marker before
// the output is taken as it is (a command changed the terminal's modes).
const settleOutput = time.Second

func (s *Sandbox) start(ctx context.Context) (*shell, error) {
	master, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	sh := &shell{master: master, tty: tty, out: make(chan []byte, 64), ctl: make(chan []byte, 8), exited: make(chan struct{})}
	fail := func(err error) (*shell, error) {
		master.Close()
		tty.Close()
		return nil, err
	}
	// The terminal is the sandbox's own: a command may reopen it
	// (echo >/dev/stderr opens /proc/self/fd/2).
	if s.dedicated {
		unix.Fchown(int(tty.Fd()), s.uid, -1)
	}
	if t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil {
		t.Lflag &^= unix.ECHO
		t.Oflag &^= unix.ONLCR
		unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, t)
		sh.term = t
	}
	pty.Setsize(master, &pty.Winsize{Rows: 50, Cols: 200})
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fail(err)
	}
	ch, err := s.spawn(ctx, []string{"/bin/bash", "--noprofile", "--norc"}, []*os.File{ctlW, tty}, func(cmd *exec.Cmd) {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, tty, tty
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 1
	})
	inR.Close()
	ctlW.Close()
	if err != nil {
		inW.Close()
		ctlR.Close()
		return fail(fmt.Errorf("start sandbox shell: %w", err))
	}
	var tok [8]byte
	rand.Read(tok[:])
	sh.cmd, sh.in, sh.box, sh.token = ch.cmd, inW, ch, hex.EncodeToString(tok[:])
	go pump(master, sh.out)
	go pump(ctlR, sh.ctl)
	go func() {
		sh.cmd.Wait()
		close(sh.exited)
	}()
	return sh, nil
}

// pump copies a descriptor's reads into ch and closes ch at EOF or error.
func pump(f *os.File, ch chan<- []byte) {
	defer close(ch)
	for {
		buf := make([]byte, 32<<10)
		n, err := f.Read(buf)
		if n > 0 {
			ch <- buf[:n]
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
		case <-sh.ctl:
		case <-time.After(5 * time.Millisecond):
			return
		}
	}
}

func (sh *shell) pid() int { return sh.cmd.Process.Pid }

func (sh *shell) kill() { sh.cmd.Process.Kill() }

// reapWait bounds how long a killed shell may take to be reaped (a process in
// uninterruptible sleep is left to the kernel rather than hanging the cut).
const reapWait = 5 * time.Second

// wait reaps the shell (up to reapWait) and stops reading its PTY.
func (sh *shell) wait() {
	select {
	case <-sh.exited:
	case <-time.After(reapWait):
	}
	sh.in.Close()
	sh.master.Close()
	sh.tty.Close()
	for range sh.out {
	}
	sh.box.close()
}

// reset gives the next command the terminal the shell started with: a
// previous command may have changed its modes or stopped its output.
func (sh *shell) reset() {
	fd := int(sh.tty.Fd())
	if sh.term != nil {
		unix.IoctlSetTermios(fd, unix.TCSETS, sh.term)
	}
	unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOON)
}

// send writes the command line to the shell's stdin, giving up at ctx's end
// or when the shell does not read it within timeout.
func (sh *shell) send(ctx context.Context, line string, timeout time.Duration) error {
	sh.in.SetWriteDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { sh.in.SetWriteDeadline(time.Now()) })
	defer stop()
	_, err := sh.in.WriteString(line)
	return err
}

// run sends one command and collects its output until its marker arrives,
// the shell dies, the timeout (then killAll(shell) and a grace period), or ctx.
func (sh *shell) run(ctx context.Context, command string, timeout time.Duration, limit int, killAll func(keep int)) (Result, error) {
	if len(command) > maxCommand {
		return Result{ExitCode: 2, Output: fmt.Sprintf("[the command is %d bytes; the most a command may have is %d: write long content with the write tool]", len(command), maxCommand)}, nil
	}
	sh.reset()
	sh.drain()
	sh.seq++
	marker := []byte(fmt.Sprintf("\x1e%s:%d:", sh.token, sh.seq))
	// The shell reads the command itself (read -d '' stops at the NUL), so
	// running it needs no fork: a sandbox at its process limit still answers.
	mark := fmt.Sprintf(`builtin printf '\036%s:%d:%%d\036' "$__rc"`, sh.token, sh.seq)
	line := fmt.Sprintf("IFS= read -r -d '' __cmd; eval \"$__cmd\" </dev/null >&%[1]d 2>&%[1]d %[2]d>&- %[1]d>&-; __rc=$?; %[3]s >&%[2]d; %[3]s >&%[1]d\n%[4]s\x00",
		ttyFD, controlFD, mark, strings.ReplaceAll(command, "\x00", ""))
	if err := sh.send(ctx, line, timeout); err != nil {
		if ctx.Err() != nil {
			return Result{Restarted: true}, ctx.Err()
		}
		return Result{Output: "[the shell did not take the command: " + err.Error() + "]", ExitCode: -1, Restarted: true}, nil
	}
	c := capture{limit: limit}
	var pending, control []byte
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var res Result
	var grace, settle <-chan time.Time
	out, ctl := sh.out, sh.ctl
	finish := func(note string) Result {
		c.write(pending)
		res.Output, res.Truncated = c.String()+note, c.cut()
		return res
	}
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
		case b, ok := <-out:
			if !ok {
				out = nil
				continue
			}
			pending = append(pending, b...)
		case b, ok := <-ctl:
			if !ok {
				ctl = nil
				continue
			}
			control = append(control, b...)
			if code, ok := findMarker(control, marker); ok && settle == nil {
				res.ExitCode = code
				settle = time.After(settleOutput)
			}
		case <-settle:
			// The command ended but its PTY marker did not come through
			// as written (the command changed the terminal's modes): drop
			// what is left of it.
			if i := bytes.LastIndexByte(pending, 0x1e); i > 0 && pending[len(pending)-1] == 0x1e {
				if j := bytes.LastIndexByte(pending[:i], 0x1e); j >= 0 {
					pending = pending[:j]
				}
			}
			if res.TimedOut {
				res.ExitCode = 124
			}
			return finish(""), nil
		case <-sh.exited:
			res.Restarted = true
			res.ExitCode = sh.exitCode()
			sh.collect(&pending)
			return finish("\n[the shell exited; a new shell starts with the next command]"), nil
		case <-timer.C:
			res.TimedOut = true
			killAll(sh.pid())
			grace = time.After(waitGone)
		case <-grace:
			res.Restarted = true
			res.ExitCode = 124
			return finish(fmt.Sprintf("\n[command timed out after %s; the shell was restarted]", timeout)), nil
		case <-ctx.Done():
			res.Restarted = true
			return finish(""), ctx.Err()
		}
	}
	res.Output, res.Truncated = c.String(), c.cut()
	if res.TimedOut {
		res.ExitCode = 124
		res.Output += fmt.Sprintf("\n[command timed out after %s and was killed]", timeout)
	}
	return res, nil
}

// collect takes what a dead shell's PTY still holds, waiting only briefly:
// a process it left behind may keep the terminal open.
func (sh *shell) collect(pending *[]byte) {
	for {
		select {
		case b, ok := <-sh.out:
			if !ok {
				return
			}
			*pending = append(*pending, b...)
		case <-time.After(20 * time.Millisecond):
			return
		}
	}
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

// exitCode is the shell's exit status once it has been reaped.
func (sh *shell) exitCode() int {
	<-sh.exited
	if ps := sh.cmd.ProcessState; ps != nil {
		return ps.ExitCode()
	}
	return -1
}

var errClosed = errors.New("sandbox is closed")

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
