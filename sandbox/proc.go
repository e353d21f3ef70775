//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
)

// members lists the host pids of a sandbox's processes: with a dedicated uid,
// every process of that uid (nothing escapes by reparenting or setsid);
// otherwise the shell, its descendants and its session.
func members(shell, uid int, dedicated bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type proc struct{ ppid, sid, uid int }
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: fields start after the last ')'.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 4 || f[0] == "Z" {
			continue // a zombie is dead already; its parent (or the kernel) reaps it
		}
		p := proc{uid: -1}
		p.ppid, _ = strconv.Atoi(f[1])
		p.sid, _ = strconv.Atoi(f[3])
		if u, ok := procUIDs(e.Name()); ok {
			p.uid = u[0]
		}
		procs[pid] = p
	}
	in := map[int]bool{}
	var out []int
	for pid, p := range procs {
		if (dedicated && p.uid == uid) || (shell > 0 && (pid == shell || p.sid == shell)) {
			in[pid] = true
			out = append(out, pid)
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, p := range procs {
			if !in[pid] && in[p.ppid] {
				in[pid], grew = true, true
				out = append(out, pid)
			}
		}
	}
	return out
}

// procUIDs reads a process's real, effective, saved and filesystem uids.
func procUIDs(pid string) ([]int, bool) {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			var u []int
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return nil, false
				}
				u = append(u, n)
			}
			return u, len(u) > 0
		}
	}
	return nil, false
}
