package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"jspark/agent/record"
	"jspark/recipes"
)

// Installation is an external agent installed with npm into the cache: one
// folder per kind and exact version, outside every workspace, shared by the
// runs that name it.
type Installation struct {
	Agent recipes.Agent
	Dir   string // the npm prefix
	Node  string // node's resolved path
	Entry string // the agent's entry script, run with Node
}

// DefaultCache is where agents are installed: a system cache folder when
// running as root (the sandbox's own uid must be able to read it, and root's
// home is closed), the user's cache folder otherwise.
func DefaultCache() string {
	if os.Getuid() == 0 {
		return "/var/cache/jspark/agents"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "jspark", "agents")
	}
	return filepath.Join(os.TempDir(), "jspark-agents")
}

// npmTimeout bounds one installation (the registry is slow, not endless).
const npmTimeout = 10 * time.Minute

// Install makes kind@version ready under cache: npm install --prefix once,
// then the cached copy. Missing node or npm is said plainly.
func Install(ctx context.Context, a recipes.Agent, cache string, log io.Writer) (*Installation, error) {
	def := externalAgents[a.Kind]
	if def == nil {
		return nil, fmt.Errorf("agent %q is not an external agent", a.Kind)
	}
	node, err := tool("node", a)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Join(cache, a.Kind+"-"+a.Version))
	if err != nil {
		return nil, err
	}
	in := &Installation{Agent: a, Dir: dir, Node: node, Entry: filepath.Join(dir, "node_modules", filepath.FromSlash(def.pkg), filepath.FromSlash(def.entry))}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent cache: %w", err)
	}
	// One installer at a time per folder, across jspark processes.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent cache: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("agent cache lock: %w", err)
	}
	if v := installedVersion(dir, def.pkg); v == a.Version {
		fmt.Fprintf(log, "jspark work: agent %s %s from the cache %s\n", a.Kind, a.Version, dir)
	} else {
		npm, err := tool("npm", a)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "jspark work: installing %s@%s with npm into %s\n", def.pkg, a.Version, dir)
		ictx, cancel := context.WithTimeout(ctx, npmTimeout)
		defer cancel()
		cmd := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", def.pkg+"@"+a.Version)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm install %s@%s: %v\n%s", def.pkg, a.Version, err, record.Clip(strings.TrimSpace(string(out))))
		}
		if v := installedVersion(dir, def.pkg); v != a.Version {
			return nil, fmt.Errorf("npm install %s@%s left version %q in %s", def.pkg, a.Version, v, dir)
		}
	}
	if _, err := os.Stat(in.Entry); err != nil {
		return nil, fmt.Errorf("agent %s %s: its entry point: %w", a.Kind, a.Version, err)
	}
	if err := readableByAll(in.Entry); err != nil && os.Getuid() == 0 {
		return nil, fmt.Errorf("agent %s: the sandbox's user cannot read its installation (%v); pass --agent-cache a folder every user may read", a.Kind, err)
	}
	return in, nil
}

// tool finds node or npm on PATH, resolved through links.
func tool(name string, a recipes.Agent) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("the recipe's agent %s %s needs Node.js: %s is not on PATH (install Node.js 20 or later with npm)", a.Kind, a.Version, name)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return filepath.Abs(p)
}

// installedVersion is the version of pkg under prefix ("" when absent).
func installedVersion(prefix, pkg string) string {
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	json.Unmarshal(b, &p)
	return p.Version
}

// readableByAll checks that every folder above p lets others through and p
// lets them read, as a sandbox running under its own uid needs.
func readableByAll(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o004 == 0 {
		return fmt.Errorf("%s is mode %v", p, fi.Mode().Perm())
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is mode %v", d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ErrNoEngine refuses an external agent on an endpoint.
var ErrNoEngine = errors.New("an external agent runs against the in-process engine (its requests are recorded from the server side): leave out --endpoint")
