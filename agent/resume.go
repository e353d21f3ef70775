package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"jspark/agent/record"
)

// A run's folder says what run it is (run.json, written first) and which
// round trials finished (each one's round.json, written last, once its
// records and files are complete, and only when no session failed for the
// infrastructure). A resumed run (--resume) must be the same run: the
// same recipe (its content, not only its name), round, trials and window;
// it keeps each finished trial's folder untouched and reads its record
// back, and runs the others afresh. The sessions of a round run together
// and are measured together, so a trial is the unit: an unfinished
// trial's sessions all run again; and a repeat round measures the cache
// its first round filled, so a first round whose repeat did not finish
// its trial runs again with it.

const (
	runFile   = "run.json"
	roundFile = "round.json"
)

// runSpec is run.json: what a run is, as --resume compares it.
type runSpec struct {
	Version      int     `json:"version"`
	Recipe       string  `json:"recipe"`
	RecipeSHA256 string  `json:"recipe_sha256"` // of the parsed recipe as JSON: a changed task is another run
	Round        string  `json:"round"`
	Trials       int     `json:"trials"`
	Window       float64 `json:"window"`
}

func specOf(o WorkOptions) (runSpec, error) {
	b, err := json.Marshal(o.Recipe)
	if err != nil {
		return runSpec{}, err
	}
	sum := sha256.Sum256(b)
	return runSpec{Version: record.Version, Recipe: o.Recipe.File, RecipeSHA256: hex.EncodeToString(sum[:]), Round: o.Round, Trials: o.Trials, Window: o.Window.Seconds()}, nil
}

// startRun makes Out and writes its run.json; resuming, it checks that Out
// holds this run (a folder with nothing in it yet is a run that had not
// begun).
func startRun(o WorkOptions) error {
	want, err := specOf(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.Out, runFile)
	if o.Resume {
		b, err := os.ReadFile(path)
		if err == nil {
			return sameRun(path, b, want)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// The only file of a run that had not begun is its claim's mark.
		if names, _ := os.ReadDir(o.Out); len(names) > 1 || len(names) == 1 && !strings.HasPrefix(names[0].Name(), ".") {
			return fmt.Errorf("--resume: %s has no %s: not a jspark work run's folder", o.Out, runFile)
		}
	}
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// sameRun checks a run.json against the run asked for, naming each
// difference.
func sameRun(path string, b []byte, want runSpec) error {
	var got runSpec
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("--resume: %s: %w", path, err)
	}
	var diff []string
	for _, d := range []struct {
		name      string
		was, asks any
	}{
		{"results version", got.Version, want.Version},
		{"recipe", got.Recipe, want.Recipe},
		{"recipe content (sha256)", got.RecipeSHA256, want.RecipeSHA256},
		{"round", got.Round, want.Round},
		{"trials", got.Trials, want.Trials},
		{"window (s)", got.Window, want.Window},
	} {
		if d.was != d.asks {
			diff = append(diff, fmt.Sprintf("%s %v, not %v", d.name, d.was, d.asks))
		}
	}
	if len(diff) > 0 {
		return fmt.Errorf("--resume: %s is another run: %s", path, strings.Join(diff, "; "))
	}
	return nil
}

// markFinished writes a trial's round.json: its record, complete.
func markFinished(dir string, r *record.Round) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, roundFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, roundFile))
}

// finished reads back a trial that the resumed run finished: its record
// and its sessions' first requests; ok is false when it did not finish.
func finished(dir, name string, trial int) (r *record.Round, sent [][]byte, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, roundFile))
	if err != nil {
		return nil, nil, false
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Name != name || r.Trial != trial || len(r.Sessions) == 0 {
		return nil, nil, false
	}
	for _, s := range r.Sessions {
		p, err := os.ReadFile(filepath.Join(dir, s.Name, "initial_request.json"))
		if err != nil {
			return nil, nil, false
		}
		sent = append(sent, p)
	}
	return r, sent, true
}
