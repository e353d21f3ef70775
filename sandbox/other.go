//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"time"
)

// errNoSandbox is New's error where the isolation it is made of (user,
// mount, pid and network namespaces, cgroups, seccomp, Landlock) does
// not exist: running an agent's commands unconfined is not offered.
var errNoSandbox = fmt.Errorf("sandbox: agent shells need Linux (namespaces, seccomp, Landlock); this is %s: run `jspark work` on Linux, or point it with --endpoint at a jspark serve here", runtime.GOOS)

// Sandbox exists here so that what holds one builds; New never makes one.
type Sandbox struct{}

// New fails: see errNoSandbox.
func New(dir string, files map[string]string, o Options) (*Sandbox, error) {
	return nil, errNoSandbox
}

func (s *Sandbox) Close() error { return errNoSandbox }
func (s *Sandbox) Exec(ctx context.Context, command string, timeout time.Duration, limit int) (Result, error) {
	return Result{}, errNoSandbox
}
func (s *Sandbox) FileSizeLimit() int64                     { return 0 }
func (s *Sandbox) Isolated() bool                           { return false }
func (s *Sandbox) Isolation() Isolation                     { return Isolation{} }
func (s *Sandbox) Kept() *Kept                              { return nil }
func (s *Sandbox) Listen(port int) (net.Listener, error)    { return nil, errNoSandbox }
func (s *Sandbox) Open(rel string) (*os.File, error)        { return nil, errNoSandbox }
func (s *Sandbox) Path(rel string) (string, error)          { return "", errNoSandbox }
func (s *Sandbox) Restart()                                 {}
func (s *Sandbox) Root() string                             { return "" }
func (s *Sandbox) Walk(rel string, fn fs.WalkDirFunc) error { return errNoSandbox }
func (s *Sandbox) WriteFile(rel string, data []byte) error  { return errNoSandbox }
