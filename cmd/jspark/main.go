// Command jspark runs coding-agent workloads against an integrated LLM
// engine and serves that engine over an OpenAI-compatible endpoint.
package main

import (
	"fmt"
	"os"
)

func main() {
	cmd := newRootCmd(os.Stdout, os.Stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "jspark: %v\n", err)
		os.Exit(1)
	}
}
