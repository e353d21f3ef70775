package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/google/shlex"
)

// targetSpec is one target of bench or work, as the command line names it:
// a boot of the in-process engine, or one or more endpoints.
type targetSpec struct {
	Name   string
	Kind   string       // boot or endpoint
	Spec   string       // the boot's engine flags, or the endpoints' URLs
	Engine *EngineFlags // a boot's: the command's engine flags, then its own
	URLs   []string     // an endpoint's, each without a trailing slash
}

// parseTargets reads --boot NAME='ENGINE FLAGS' and --endpoint [NAME=]URL,
// the boots in the order given, then the endpoints; with neither, one boot,
// jspark, with the command's engine flags. A boot is parent (the command's
// engine flags) with its own applied on a copy; its spec names the flags
// given to the command (given) and its own. spread makes the unnamed
// endpoints one target that spreads its sessions over them (work);
// otherwise each is its own target, named by its host:port (bench).
func parseTargets(parent *EngineFlags, given, boots, endpoints []string, spread bool) ([]targetSpec, error) {
	var out []targetSpec
	seen := map[string]bool{}
	add := func(t targetSpec) error {
		if seen[t.Name] {
			return fmt.Errorf("two targets are named %q", t.Name)
		}
		seen[t.Name] = true
		out = append(out, t)
		return nil
	}
	if len(boots) == 0 && len(endpoints) == 0 {
		boots = []string{"jspark="}
	}
	for _, b := range boots {
		t, err := parseBoot(parent, given, b)
		if err != nil {
			return nil, err
		}
		if err := add(t); err != nil {
			return nil, err
		}
	}
	var unnamed []string
	for _, e := range endpoints {
		name, u, named := endpointName(e)
		if _, err := url.ParseRequestURI(u); err != nil || !strings.HasPrefix(u, "http") {
			return nil, fmt.Errorf("--endpoint %q: want [NAME=]http://host:port/v1", e)
		}
		u = strings.TrimSuffix(u, "/")
		if spread && !named {
			unnamed = append(unnamed, u)
			continue
		}
		if err := add(targetSpec{Name: name, Kind: "endpoint", Spec: u, URLs: []string{u}}); err != nil {
			return nil, err
		}
	}
	if len(unnamed) > 0 {
		var hosts []string
		for _, u := range unnamed {
			h, _, _ := endpointName(u)
			hosts = append(hosts, h)
		}
		if err := add(targetSpec{Name: strings.Join(hosts, "+"), Kind: "endpoint", Spec: strings.Join(unnamed, " "), URLs: unnamed}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// endpointName splits "NAME=URL"; a bare URL is named by its host:port.
func endpointName(s string) (name, u string, named bool) {
	if i := strings.Index(s, "="); i > 0 && !strings.ContainsAny(s[:i], ":/") {
		return s[:i], s[i+1:], true
	}
	if p, err := url.Parse(s); err == nil && p.Host != "" {
		return p.Host, s, false
	}
	return s, s, false
}

// parseBoot reads one --boot NAME='ENGINE FLAGS'.
func parseBoot(parent *EngineFlags, given []string, b string) (targetSpec, error) {
	name, flags, ok := strings.Cut(b, "=")
	if !ok || name == "" || strings.ContainsAny(name, `/\`) {
		return targetSpec{}, fmt.Errorf("--boot %q: want NAME='ENGINE FLAGS' (a name without slashes)", b)
	}
	words, err := shlex.Split(flags)
	if err != nil {
		return targetSpec{}, fmt.Errorf("--boot %s: %w", name, err)
	}
	ef, err := parent.boot(words)
	if err != nil {
		return targetSpec{}, fmt.Errorf("--boot %s: %w", name, err)
	}
	return targetSpec{Name: name, Kind: "boot", Spec: joinSpec(given, words), Engine: ef}, nil
}
