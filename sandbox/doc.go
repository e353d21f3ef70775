// Package sandbox owns a session's workspace and the shell that runs its
// commands: isolation (user, mount, pid and network namespaces where the kernel
// allows, rlimits always), PTY shells, per-command timeouts and the cleanup of
// every process a session started.
//
// # What a sandbox sees of the host
//
// With namespaces, the root is built from an allowlist (buildRoot in
// root.go), never the host's root made read-only: system directories and a
// curated /etc read-only, a minimal /dev, its own /proc and /tmp, the
// workspace at Home, and read-only the folders Options.ReadOnly names and the
// install prefixes of python3, bash and Options.Programs (a pyenv under /root
// is bound by a clone the parent makes, so /root itself stays unseen).
// Nothing else: no /root, /home, /run, project folders, other workspaces, no
// host unix socket. Where the kernel has Landlock (ABI 2 or later), the init
// also restricts itself to those paths before it becomes the shell, which
// also keeps the mounts as built (without it the sandbox's root, root of its
// user namespace only, could remount its binds read-write; files it does not
// own stay closed to it by their permissions); without namespaces Landlock
// is all that keeps the host's files closed. Without namespaces a sandbox
// also gets a temporary folder of its own (TMPDIR; Landlock keeps the host's
// /tmp closed) and a seccomp filter that refuses new unix sockets, so no host
// socket is reachable by its path (host.go, seccomp.go). Isolation says what
// is in force, and the first sandbox prints it once with a loud warning for
// each thing missing, and for each thing still open.
//
// # The workspace on disk, and what a killed run leaves
//
// A capped workspace (a tmpfs) is copied into its folder, which must be
// fresh, after every command and at Close (keep.go): beneath the folder's
// descriptor, never through a symlink, holes kept, a hard-linked file once,
// within the cap (Kept says what was left out). So a run that is killed
// still has its workspaces where its results are, and the next run's first
// sandbox removes the cgroups and kills the processes that the killed run's
// sandboxes left, by the records in their uid locks (reap.go). ClaimOut and
// NewOut give each run an output folder no other run has, and ResumeOut
// gives a stopped run's folder back to the run that resumes it (out.go).
//
// # Commands end, whatever they do
//
// A command's end is marked by the wrapper the shell runs it in, never by the
// command's own output: its stdin, stdout and stderr are given (and restored
// after it, even after `exec >log 2>&1`), and the marker with $? goes both on
// a control pipe the command never sees and on the terminal. Every wait of a
// command (sending it, reading its output, reaping a dead shell) also ends at
// the caller's context, which is the session's cut.
//
// # Host-side file access
//
// The file tools run inside jspark, so the sandbox's limits do not bind them.
// They reach the workspace through Open and WriteFile only: openat2 beneath the
// workspace's descriptor with no symlinks, O_NONBLOCK, regular files only (a
// FIFO, socket or device is refused, never waited on), and WriteFile writes no
// more than the file-size limit.
//
// # Doors: a host service inside the sandbox
//
// A namespaced sandbox has no network, but a process in it may need one host
// service (an external agent such as Pi needs the in-process engine). Listen
// opens a door for it:
//
//	l, err := box.Listen(0)            // before the first command
//	go http.Serve(l, engineHandler)    // the caller serves what comes in
//	url := "http://" + l.Addr().String() + "/v1" // as the sandbox sees it
//	box.Exec(ctx, "pi -p ... --base-url "+url, timeout, limit)
//
// Each shell's init opens a listening socket on 127.0.0.1:PORT inside the
// sandbox's own network namespace (bringing its loopback up) before the shell
// exists, and hands it to jspark over a socket pair; jspark accepts on it, so
// the connections of the sandbox's processes arrive on l. No process inside
// relays anything (nothing there for the sandbox to kill or impersonate), no
// socket file appears in its filesystem, and no other host address becomes
// reachable. The address stays the same across shell restarts (each shell
// is a new namespace; its init opens the same port again); port 0 numbers
// the doors from 40000. At most 64 connections per door are open at once.
// Without namespaces a door is a plain listener on the host's loopback (port
// 0: any free port). Close closes every door. What the service's client needs
// on disk (an agent installed with npm outside the workspace) is named in
// Options.ReadOnly and appears read-only at the same path; its interpreter
// (node) is named in Options.Programs.
package sandbox
