// Package sandbox owns a session's workspace and the shell that runs its
// commands: isolation (user, mount, pid and network namespaces where the kernel
// allows, rlimits always), PTY shells, per-command timeouts and the cleanup of
// every process a session started.
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
package sandbox
