//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A sandbox's processes share one cgroup where the machine gives one, so
// memory (their tmpfs pages included), process count and CPU share are bounded
// for the sandbox as a whole, not per process. The cgroup is made under
// jspark's own (the subtree it was given), lives as long as the sandbox, and
// every shell the sandbox starts enters it before it runs anything.
//
// cgroup v2 is used where its memory and pids controllers reach jspark's
// cgroup's children; otherwise v1's memory, pids and cpu hierarchies (what
// hybrid machines such as this project's expose); otherwise none, said once.

// cgroupSetup is where sandboxes' cgroups go: one parent folder for v2, one
// per controller for v1.
type cgroupSetup struct {
	v2      bool
	parents map[string]string // controller ("" for v2) → jspark's own cgroup folder
}

// cgroup is one sandbox's.
type cgroup struct {
	v2   bool
	dirs []string // v2: one; v1: memory, pids, cpu (those present)
}

func (c *cgroupSetup) mode() string {
	if c.v2 {
		return "cgroup v2"
	}
	return "cgroup v1"
}

var cgroupSeq atomic.Int64

// cgroups finds, once, how this machine can bound a sandbox as a whole.
var cgroups = sync.OnceValues(func() (*cgroupSetup, string) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err.Error()
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err.Error()
	}
	paths := map[string]string{} // controller → our path in its hierarchy ("" → v2)
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			paths[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	var why []string
	if m, ok := mounts[""]; ok {
		dir := m.dir(paths[""])
		err := enableV2(dir)
		if err == nil {
			return &cgroupSetup{v2: true, parents: map[string]string{"": dir}}, ""
		}
		why = append(why, "v2: "+err.Error())
	}
	setup := &cgroupSetup{parents: map[string]string{}}
	for _, c := range []string{"memory", "pids", "cpu"} {
		m, ok := mounts[c]
		if !ok {
			continue
		}
		dir := m.dir(paths[c])
		if err := probeDir(dir); err != nil {
			why = append(why, fmt.Sprintf("v1 %s: %v", c, err))
			continue
		}
		setup.parents[c] = dir
	}
	if setup.parents["memory"] != "" && setup.parents["pids"] != "" {
		return setup, ""
	}
	if len(why) == 0 {
		why = append(why, "no cgroup v2 with memory and pids, no v1 memory and pids hierarchies")
	}
	return nil, strings.Join(why, "; ")
})

// cgroupMount is where a hierarchy is mounted and which of its paths that is.
type cgroupMount struct{ point, root string }

func (m cgroupMount) dir(path string) string {
	rel, err := filepath.Rel(m.root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "."
	}
	return filepath.Join(m.point, rel)
}

// cgroupMounts maps each mounted controller (v1) and "" (v2) to its mount.
func cgroupMounts() (map[string]cgroupMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	out := map[string]cgroupMount{}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{point: unescapeMount(f[4]), root: unescapeMount(f[3])}
		switch g[0] {
		case "cgroup2":
			out[""] = m
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				if opt == "memory" || opt == "pids" || opt == "cpu" {
					out[opt] = m
				}
			}
		}
	}
	return out, nil
}

// enableV2 makes memory and pids (and cpu where offered) reach dir's children.
func enableV2(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	offered := strings.Fields(string(have))
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(offered, c) {
			return fmt.Errorf("%s has no %s controller (it has: %s)", dir, c, strings.Join(offered, " "))
		}
	}
	on, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var add []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if slices.Contains(offered, c) && !slices.Contains(strings.Fields(string(on)), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0); err != nil {
			return fmt.Errorf("enable %s in %s: %w (a cgroup with processes cannot give its children controllers: run jspark in a delegated cgroup of its own)", strings.Join(add, " "), dir, err)
		}
	}
	return probeDir(dir)
}

// probeDir checks that a child cgroup can be made (and removed) in dir.
func probeDir(dir string) error {
	p := filepath.Join(dir, fmt.Sprintf("jspark-probe-%d", os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Remove(p)
}

// newCgroup makes a sandbox's cgroup with its limits.
func newCgroup(setup *cgroupSetup, l Limits) (*cgroup, error) {
	name := fmt.Sprintf("jspark-sandbox-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	cg := &cgroup{v2: setup.v2}
	settings := map[string][][2]string{}
	if setup.v2 {
		settings[""] = [][2]string{
			{"memory.max", limit(l.Memory)}, {"memory.swap.max", "0"},
			{"pids.max", limit(l.Processes)}, {"cpu.weight", weight(l.CPUWeight, false)},
		}
	} else {
		settings["memory"] = [][2]string{{"memory.limit_in_bytes", limitV1(l.Memory)}, {"memory.memsw.limit_in_bytes", limitV1(l.Memory)}}
		settings["pids"] = [][2]string{{"pids.max", limit(l.Processes)}}
		settings["cpu"] = [][2]string{{"cpu.shares", weight(l.CPUWeight, true)}}
	}
	for _, c := range []string{"", "memory", "pids", "cpu"} {
		parent, ok := setup.parents[c]
		if !ok {
			continue
		}
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		cg.dirs = append(cg.dirs, dir)
		for _, kv := range settings[c] {
			if kv[1] == "" {
				continue
			}
			err := os.WriteFile(filepath.Join(dir, kv[0]), []byte(kv[1]), 0)
			// Swap files are absent where the kernel has no swap accounting;
			// a cpu share is a preference. Memory and pids must hold.
			if err != nil && !strings.Contains(kv[0], "swap") && !strings.Contains(kv[0], "memsw") && !strings.HasPrefix(kv[0], "cpu.") {
				cg.remove()
				return nil, fmt.Errorf("cgroup %s: %w", kv[0], err)
			}
		}
	}
	return cg, nil
}

func limit(v uint64) string {
	if v == 0 {
		return "max"
	}
	return strconv.FormatUint(v, 10)
}

func limitV1(v uint64) string {
	if v == 0 {
		return "-1"
	}
	return strconv.FormatUint(v, 10)
}

// weight maps a v2 cpu.weight (100: a plain process's share) to the file's
// value; v1's cpu.shares has 1024 for the same.
func weight(w uint64, v1 bool) string {
	if w == 0 {
		return ""
	}
	if v1 {
		return strconv.FormatUint(max(2, w*1024/100), 10)
	}
	return strconv.FormatUint(min(max(w, 1), 10000), 10)
}

// add moves a process into the cgroup (every hierarchy of it).
func (cg *cgroup) add(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: add %d to %s: %w", pid, dir, err)
		}
	}
	return nil
}

// procs lists the processes in the cgroup.
func (cg *cgroup) procs() []int {
	if cg == nil || len(cg.dirs) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(cg.dirs[0], "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// file reads one of the cgroup's files (the first hierarchy that has it).
func (cg *cgroup) file(name string) string {
	for _, dir := range cg.dirs {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// remove deletes the cgroup once its processes are gone (they were killed;
// exiting takes a moment).
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	for _, dir := range cg.dirs {
		for i := 0; i < 100; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cg.dirs = nil
}
