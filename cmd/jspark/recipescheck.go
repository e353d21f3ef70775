package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jspark/recipes"
	"jspark/recipes/check"
	"jspark/recipes/harbor"
	"jspark/sandbox"
)

// RecipesCheckOptions are the flags of `jspark recipes check`.
type RecipesCheckOptions struct {
	Out          string
	Jobs         int
	NoNamespaces bool
}

func newRecipesCheckCmd(stdout io.Writer) *cobra.Command {
	o := &RecipesCheckOptions{}
	cmd := &cobra.Command{
		Use:   "check [FILE|NAME]",
		Short: "Prove each task: its oracle must pass the hidden tests, the untouched workspace fail them",
		Long: `For every task of a recipe (the built-in work recipe without an argument), run
two sanity agents in real sandboxes, as Harbor does: the oracle (the seed files,
then the task's solution) and the nop (the seed files untouched). Each then gets
the hidden tests copied in and the check run in a fresh shell. The oracle must
pass and the nop fail; every task that does not discriminate is listed with the
reason, and the command exits 1. A task marked not_runnable is listed, not run.
No engine is needed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "work"
			if len(args) == 1 {
				name = strings.TrimPrefix(args[0], "builtin:")
			}
			return o.run(cmd.Context(), name, stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "output folder for the trials' workspaces and check.json (default: results/check-RECIPE-TIME)")
	f.IntVar(&o.Jobs, "jobs", 2, "tasks checked at once")
	f.BoolVar(&o.NoNamespaces, "no-namespaces", false, "run the sandboxes with rlimits and process groups only")
	return cmd
}

func (o *RecipesCheckOptions) run(ctx context.Context, name string, stdout, stderr io.Writer) error {
	if o.Jobs < 1 {
		return fmt.Errorf("--jobs %d: at least 1", o.Jobs)
	}
	r, err := recipes.Load(name)
	if err != nil {
		return err
	}
	out := o.Out
	if out == "" {
		out, err = sandbox.NewOut(filepath.Join("results", fmt.Sprintf("check-%s-%s", r.Name, time.Now().Format("20060102-150405"))))
	} else {
		err = sandbox.ClaimOut(out)
	}
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "recipes check %s: %d tasks; workspaces in %s\n", r.File, len(r.Tasks), out)
	reports, err := check.Recipe(ctx, r, check.Options{
		Out: out, Sandbox: sandbox.Options{NoNamespaces: o.NoNamespaces, Log: stderr}, OutputLimit: r.Shell.OutputLimit, Jobs: o.Jobs,
	})
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"recipe": r.File, "tasks": reports}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "check.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return printChecks(stdout, reports)
}

// printChecks writes a line per task (and the failing trial's output under a
// task that does not discriminate) and a closing count; its error says how
// many tasks do not discriminate.
func printChecks(w io.Writer, reports []check.Report) error {
	bad, skipped := 0, 0
	for _, rep := range reports {
		switch {
		case rep.NotRunnable != "":
			skipped++
			fmt.Fprintf(w, "  %-24s skip  not runnable here: %s\n", rep.Task, rep.NotRunnable)
		case rep.Problem != "":
			bad++
			fmt.Fprintf(w, "  %-24s FAIL  %s\n", rep.Task, rep.Problem)
			tr := rep.Oracle
			if rep.Oracle.Result.Passed && rep.Oracle.ActError == "" {
				tr = rep.Nop
			}
			if tail := lastLines(tr.Result.Output, 12); tail != "" {
				fmt.Fprintf(w, "      %s's check output, last lines:\n%s", tr.Agent, indent(tail, "        "))
			}
		default:
			fmt.Fprintf(w, "  %-24s ok    oracle %s; nop %s\n", rep.Task, trialText(rep.Oracle), trialText(rep.Nop))
		}
	}
	fmt.Fprintf(w, "%d tasks: %d discriminate, %d do not, %d not runnable here\n", len(reports), len(reports)-bad-skipped, bad, skipped)
	if bad > 0 {
		return fmt.Errorf("%d of %d tasks do not discriminate", bad, len(reports))
	}
	return nil
}

// trialText says how a trial came out: the check's exit and time, or the
// reply's verdict.
func trialText(tr *check.Trial) string {
	verb := map[bool]string{true: "passes", false: "fails"}[tr.Result.Passed]
	switch res := tr.Result; {
	case res.ExitCode != nil:
		return fmt.Sprintf("%s (exit %d, %.2fs)", verb, *res.ExitCode, res.Duration.Seconds())
	case res.ExpectMet != nil:
		return verb + " (by its reply)"
	}
	return verb
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre) + "\n"
}

// RecipesImportOptions are the flags of `jspark recipes import harbor`.
type RecipesImportOptions struct {
	Output string
}

func newRecipesImportCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Make a recipe from another harness's tasks"}
	o := &RecipesImportOptions{}
	h := &cobra.Command{
		Use:   "harbor DIR",
		Short: "Make a recipe from Harbor (Terminal-Bench 2) task folders",
		Long: `Read DIR, a Harbor task folder (task.toml, instruction.md, environment/,
tests/, solution/) or a folder of them, and write a recipe: the tests become
hidden tests, the solution the oracle. Docker cannot run here: a task whose
image installs anything, or whose scripts need more than sh, python3 and
coreutils, is kept with not_runnable and the reason, and no round runs it.
Each task's finding goes to stderr; the recipe to stdout or --output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(args[0], stdout, cmd.ErrOrStderr())
		},
	}
	h.Flags().StringVarP(&o.Output, "output", "o", "", "write the recipe to this file (default: stdout)")
	cmd.AddCommand(h)
	return cmd
}

func (o *RecipesImportOptions) run(dir string, stdout, stderr io.Writer) error {
	im, err := harbor.Import(dir)
	if im != nil {
		for _, t := range im.Tasks {
			if t.NotRunnable != "" {
				fmt.Fprintf(stderr, "%s: not runnable here: %s\n", t.ID, t.NotRunnable)
			} else {
				fmt.Fprintf(stderr, "%s: runnable\n", t.ID)
			}
		}
	}
	if err != nil {
		return err
	}
	if o.Output == "" {
		_, err = stdout.Write(im.YAML)
		return err
	}
	f, err := os.OpenFile(o.Output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: the import does not overwrite a file", o.Output)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(im.YAML); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
