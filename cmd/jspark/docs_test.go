package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docRow is one row of a docs flag table: the flag and the default it
// names ("–" for none).
type docRow struct{ Flag, Default string }

// docFlagRows are the rows of the flag table under the heading that ends
// with section in docs/page, in order.
func docFlagRows(t *testing.T, page, section string) []docRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.HasSuffix(strings.TrimSpace(line), section)
			continue
		}
		if !in || !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.SplitN(line, "|", 4)
		rows = append(rows, docRow{strings.Trim(strings.TrimSpace(cells[1]), "`"), strings.TrimSpace(cells[2])})
	}
	if len(rows) == 0 {
		t.Fatalf("docs/%s: no flag table under a heading ending %q", page, section)
	}
	return rows
}

// flagRows are a flag set's flags as their docs rows would give them.
func flagRows(f *pflag.FlagSet) []docRow {
	var rows []docRow
	f.VisitAll(func(fl *pflag.Flag) {
		if fl.Name == "help" {
			return
		}
		def := "`" + fl.DefValue + "`"
		if fl.DefValue == "" || fl.DefValue == "[]" {
			def = "–"
		}
		rows = append(rows, docRow{"--" + fl.Name, def})
	})
	return rows
}

func sortRows(rows []docRow) []docRow {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b docRow) int { return strings.Compare(a.Flag, b.Flag) })
	return out
}

func subcommand(t *testing.T, root *cobra.Command, path ...string) *cobra.Command {
	t.Helper()
	c, rest, err := root.Find(path)
	if err != nil || len(rest) > 0 {
		t.Fatalf("no command %v: %v", path, err)
	}
	return c
}

// TestDocsFlagTables: each command's flags (as --help lists them) and the
// flag tables of its docs page agree, name for name and default for
// default. A flag added without a row, a row naming a flag that no longer
// exists, or a default that changed on one side only fails here.
func TestDocsFlagTables(t *testing.T) {
	engine, device := defaultEngineFlags(), defaultDeviceFlags()
	deviceSet := pflag.NewFlagSet("device", pflag.ContinueOnError)
	device.add(deviceSet)
	shared := map[string][]docRow{"": nil}
	engineRows := docFlagRows(t, "serve.md", "Engine flags")
	if d := cmp.Diff(sortRows(flagRows(engine.flagSet())), sortRows(engineRows)); d != "" {
		t.Errorf("docs/serve.md's engine flags (-flags +docs):\n%s", d)
	}
	shared["engine"] = engineRows
	for _, r := range engineRows {
		if deviceSet.Lookup(strings.TrimPrefix(r.Flag, "--")) != nil {
			shared["device"] = append(shared["device"], r)
		}
	}
	root := newRootCmd(io.Discard, io.Discard)
	known := map[string]map[string]bool{} // page → the flags its commands have
	for _, c := range []struct {
		path          []string
		page, section string
		shared        string // the shared table the command's flags include
	}{
		{[]string{"serve"}, "serve.md", "Flags", "engine"},
		{[]string{"work"}, "work.md", "Flags", "engine"},
		{[]string{"bench"}, "bench.md", "Flags", "engine"},
		{[]string{"generate"}, "models.md", "jspark generate", "device"},
		{[]string{"model", "info"}, "models.md", "jspark model info", ""},
		{[]string{"model", "synth"}, "models.md", "jspark model synth", ""},
		{[]string{"recipes", "check"}, "recipes.md", "Flags of jspark recipes check", ""},
		{[]string{"recipes", "import", "harbor"}, "recipes.md", "Flags of jspark recipes import harbor", ""},
	} {
		t.Run(strings.Join(c.path, " "), func(t *testing.T) {
			docs := append(docFlagRows(t, c.page, c.section), shared[c.shared]...)
			flags := flagRows(subcommand(t, root, c.path...).Flags())
			if d := cmp.Diff(sortRows(flags), sortRows(docs)); d != "" {
				t.Errorf("jspark %s --help and docs/%s (-flags +docs):\n%s", strings.Join(c.path, " "), c.page, d)
			}
			if known[c.page] == nil {
				known[c.page] = map[string]bool{}
			}
			for _, r := range flags {
				known[c.page][r.Flag] = true
			}
		})
	}
	// A flag row anywhere else in a page names a flag of its commands.
	for page, flags := range known {
		for _, r := range docFlagRows(t, page, "") {
			if !flags[r.Flag] {
				t.Errorf("docs/%s has a row for %s, which none of its commands has", page, r.Flag)
			}
		}
	}
}
