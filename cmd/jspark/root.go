package main

import (
	"io"

	"github.com/spf13/cobra"
)

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "jspark",
		Short:         "Agent workloads against an integrated LLM engine, and that engine as an OpenAI-compatible server",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newGenerateCmd(stdout, stderr), newModelCmd(stdout, stderr), newServeCmd(stdout, stderr),
		newWorkCmd(stdout, stderr), newRecipesCmd(stdout), newBenchCmd(stdout, stderr))
	return root
}
