package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/google/shlex"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
// jspark, with the command's engine flags (engineArgs). A boot parses
// engineArgs and then its own flags as serve parses them. spread makes the
// unnamed endpoints one target that spreads its sessions over them (work);
// otherwise each is its own target, named by its host:port (bench).
func parseTargets(boots, endpoints, engineArgs []string, spread bool) ([]targetSpec, error) {
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
		name, flags, ok := strings.Cut(b, "=")
		if !ok || name == "" || strings.ContainsAny(name, `/\`) {
			return nil, fmt.Errorf("--boot %q: want NAME='ENGINE FLAGS' (a name without slashes)", b)
		}
		words, err := shlex.Split(flags)
		if err != nil {
			return nil, fmt.Errorf("--boot %s: %w", name, err)
		}
		args := append(append([]string{}, engineArgs...), words...)
		ef, err := parseEngineFlags(args)
		if err != nil {
			return nil, fmt.Errorf("--boot %s: %w", name, err)
		}
		if err := add(targetSpec{Name: name, Kind: "boot", Spec: strings.Join(args, " "), Engine: ef}); err != nil {
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

// parseEngineFlags reads a boot's engine flags with the flag definitions
// serve and work use.
// NOTE: one small function so that it switches over to the consolidated
// engine-flag parser once that lands.
func parseEngineFlags(args []string) (*EngineFlags, error) {
	o := &EngineFlags{}
	c := &cobra.Command{Use: "boot"}
	addEngineFlags(c, o)
	f := c.Flags()
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	if f.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (engine flags only)", f.Arg(0))
	}
	return o, nil
}

// changedEngineFlags are the engine flags set on the command line, as
// arguments a boot's own flags are parsed after.
func changedEngineFlags(fs *pflag.FlagSet) []string {
	probe := &cobra.Command{}
	addEngineFlags(probe, &EngineFlags{})
	engine := probe.Flags()
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		if engine.Lookup(f.Name) != nil {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}
