//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// namespaced makes a sandbox with namespaces, or skips saying why there are none.
func namespaced(t *testing.T, o Options) *Sandbox {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "ws"), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.Isolated() {
		_, why := namespaces()
		lacks(t, "namespaces are not available here (%s)", why)
	}
	return s
}

// plant makes a folder outside the workspace and outside /tmp (the host's
// project tree, where a session's own folder lies), open to every uid, with
// a secret file in it.
func plant(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(wd, ".jspark-plant-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSessionCannotSeeHostFolders(t *testing.T) {
	s := namespaced(t, Options{})
	project := plant(t)
	hostTmp := t.TempDir()
	os.Chmod(hostTmp, 0o755)
	os.WriteFile(filepath.Join(hostTmp, "secret"), []byte("SECRET\n"), 0o644)
	wd, _ := os.Getwd()
	var cmd strings.Builder
	for _, p := range []string{project, filepath.Join(project, "secret"), hostTmp, filepath.Join(hostTmp, "secret"), wd,
		"/root", "/run", "/var/run", "/srv", "/mnt", "/opt", "/work", "/sys", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh"} {
		fmt.Fprintf(&cmd, "test -e %[1]q && echo VISIBLE %[1]s; ", p)
	}
	fmt.Fprintf(&cmd, "cat %q %q 2>/dev/null; ls /home; true", filepath.Join(project, "secret"), filepath.Join(hostTmp, "secret"))
	r := run(t, s, cmd.String(), 10*time.Second)
	if strings.Contains(r.Output, "VISIBLE") || strings.Contains(r.Output, "SECRET") || strings.TrimSpace(r.Output) != "agent" {
		t.Errorf("the sandbox sees the host:\n%s", r.Output)
	}
}

func TestSessionCannotReadEtcSecrets(t *testing.T) {
	s := namespaced(t, Options{})
	r := run(t, s, "for f in /etc/shadow /etc/shadow- /etc/gshadow /etc/sudoers /etc/sudoers.d /etc/ssh /etc/ssl/private /etc/npmrc; do test -e $f && echo VISIBLE $f; done; cat /etc/shadow", 10*time.Second)
	if strings.Contains(r.Output, "VISIBLE") || !strings.Contains(r.Output, "No such file") {
		t.Errorf("secrets of /etc are in the sandbox:\n%s", r.Output)
	}
	if r := run(t, s, "getent passwd root >/dev/null && test -s /etc/ld.so.cache && echo ok", 10*time.Second); r.Output != "ok\n" {
		t.Errorf("what programs need of /etc is missing: %+v", r)
	}
}

func TestSessionCannotConnectToHostUnixSocket(t *testing.T) {
	s := namespaced(t, Options{})
	sock := filepath.Join(plant(t), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o777)
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	r := run(t, s, fmt.Sprintf(`test -e %[1]q && echo VISIBLE; python3 -c 'import socket; c = socket.socket(socket.AF_UNIX); c.connect(%[1]q); c.send(b"hi"); print("CONNECTED")'`, sock), 10*time.Second)
	if strings.Contains(r.Output, "VISIBLE") || strings.Contains(r.Output, "CONNECTED") {
		t.Errorf("the host's socket is reachable:\n%s", r.Output)
	}
	select {
	case <-accepted:
		t.Errorf("the host accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestInterpretersRun(t *testing.T) {
	s := namespaced(t, Options{})
	if r := run(t, s, `python3 -c 'print(1)' && bash -c 'echo $((6*7))' && sh -c 'echo sh'`, 10*time.Second); r.Output != "1\n42\nsh\n" {
		t.Errorf("python3, bash and sh must run: %+v", r)
	}
	if r := run(t, s, `echo err >/dev/stderr; echo out >/dev/stdout; python3 -c 'import os, ssl; print(len(os.openpty()))'`, 10*time.Second); r.Output != "err\nout\n2\n" {
		t.Errorf("terminal and /dev: %+v", r)
	}
}

// A program installed outside the system folders (a pyenv under /root, a
// Node under /opt) is seen at its prefix, read-only, and nothing beside it.
func TestProgramPrefixOutsideSystemDirsIsBound(t *testing.T) {
	home := plant(t)
	os.Chmod(home, 0o700) // as /root is: the sandbox's uid may not pass
	prefix := filepath.Join(home, "versions", "1.0")
	os.MkdirAll(filepath.Join(prefix, "bin"), 0o755)
	os.MkdirAll(filepath.Join(prefix, "lib"), 0o755)
	os.WriteFile(filepath.Join(prefix, "lib", "data"), []byte("LIB\n"), 0o644)
	tool := filepath.Join(prefix, "bin", "jspark-tool")
	os.WriteFile(tool, []byte("#!/bin/sh\necho TOOL-RAN; cat \"$(dirname \"$0\")/../lib/data\"\n"), 0o755)
	s := namespaced(t, Options{Programs: []string{tool}})
	if os.Getuid() != 0 {
		os.Chmod(home, 0o755) // an unprivileged parent binds by path, as the sandbox's uid
	}
	r := run(t, s, fmt.Sprintf("jspark-tool; test -e %q && echo VISIBLE; touch %q/x 2>/dev/null && echo WRITABLE; true",
		filepath.Join(home, "secret"), prefix), 10*time.Second)
	if r.Output != "TOOL-RAN\nLIB\n" {
		t.Errorf("the program's prefix, and only it, read-only: %+v", r)
	}
}

func TestReadOnlyFoldersAreVisibleReadOnly(t *testing.T) {
	// One in the project tree, one under the host's /tmp (the sandbox's own
	// /tmp must not cover it).
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "secret"), []byte("SECRET\n"), 0o644)
	for _, dir := range []string{plant(t), tmp} {
		s := namespaced(t, Options{ReadOnly: []string{dir}})
		f := filepath.Join(dir, "secret")
		r := run(t, s, fmt.Sprintf("cat %q; echo x >> %q || echo REFUSED; touch %q/new 2>/dev/null || echo REFUSED", f, f, dir), 10*time.Second)
		if !strings.HasPrefix(r.Output, "SECRET\n") || strings.Count(r.Output, "REFUSED") != 2 {
			t.Errorf("%s: a read-only folder must be readable and not writable: %+v", dir, r)
		}
		if b, _ := os.ReadFile(f); string(b) != "SECRET\n" {
			t.Errorf("the host file changed: %q", b)
		}
	}
	for _, bad := range []string{"/", "/home", "/tmp"} {
		if _, err := New(filepath.Join(t.TempDir(), "ws"), nil, Options{ReadOnly: []string{bad}}); err == nil {
			t.Errorf("ReadOnly %s would cover the sandbox's own folders; it must be refused", bad)
		}
	}
}

func TestLandlockProbeIsReported(t *testing.T) {
	s := newSandbox(t, nil)
	iso := s.Isolation()
	abi, why := landlockProbe()
	if iso.Landlock != abi || iso.LandlockNote != why {
		t.Errorf("Isolation says Landlock %d %q, the probe %d %q", iso.Landlock, iso.LandlockNote, abi, why)
	}
	if abi == 0 && !strings.HasPrefix(why, "unavailable (") {
		t.Errorf("why Landlock is not used: %q", why)
	}
	want := fmt.Sprintf("landlock: ABI %d", abi)
	if abi == 0 {
		want = "landlock: " + why
	}
	if !strings.Contains(iso.Mode(), want) {
		t.Errorf("Mode() %q does not say %q", iso.Mode(), want)
	}
}

// Landlock binds what the mounts alone would allow: /proc is mounted
// read-write, yet a write to it is refused, and the sandbox's root (root of
// its user namespace) cannot change its mounts.
func TestLandlockRefusesWhatMountsAllow(t *testing.T) {
	if abi, why := landlockProbe(); abi == 0 {
		lacks(t, "Landlock %s", why)
	}
	s := namespaced(t, Options{})
	if r := run(t, s, "echo renamed > /proc/self/comm && echo WROTE; mount -o remount,bind,rw /usr 2>/dev/null && echo REMOUNTED; umount /etc/passwd 2>/dev/null && echo UNMOUNTED; mkdir a b && echo x > a/f && mv a/f b/f && cat b/f", 10*time.Second); strings.Contains(r.Output, "WROTE") || strings.Contains(r.Output, "MOUNTED") || !strings.HasSuffix(r.Output, "x\n") {
		t.Errorf("Landlock: %+v", r)
	}
}

// Without namespaces, Landlock is what keeps a session out of the host's files.
func TestWithoutNamespacesSessionCannotReadHostFiles(t *testing.T) {
	if abi, why := landlockProbe(); abi == 0 {
		lacks(t, "Landlock %s: without namespaces the host's files are open to the sandbox's uid", why)
	}
	project := plant(t)
	s, err := New(filepath.Join(t.TempDir(), "ws"), map[string]string{"f": "in\n"}, Options{NoNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := run(t, s, fmt.Sprintf("cat %q || echo REFUSED; cat f; python3 -c 'print(1)'", filepath.Join(project, "secret")), 10*time.Second)
	if strings.Contains(r.Output, "SECRET") || !strings.HasSuffix(r.Output, "REFUSED\nin\n1\n") {
		t.Errorf("without namespaces: %+v", r)
	}
	if !strings.Contains(s.Isolation().Root, "Landlock") {
		t.Errorf("Isolation must say Landlock limits the files: %q", s.Isolation().Root)
	}
}
