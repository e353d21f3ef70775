package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// APIKeyEnv names the environment variable a key may come from instead of
// the command line, where every local user can read it (ps, /proc/PID/cmdline).
const APIKeyEnv = "JSPARK_API_KEY"

// maxKeyFile bounds what --api-key-file reads: a key is a line, not a file.
const maxKeyFile = 4 << 10

// APIKeyFlags are --api-key and --api-key-file; with neither, the key comes
// from JSPARK_API_KEY.
type APIKeyFlags struct {
	Key  string
	File string
}

func (o *APIKeyFlags) add(f *pflag.FlagSet, what string) {
	f.StringVar(&o.Key, "api-key", "", what+"; VISIBLE TO EVERY LOCAL USER in the process list: prefer --api-key-file or "+APIKeyEnv)
	f.StringVar(&o.File, "api-key-file", "", "read the key from this file (its first line) instead of --api-key")
}

// resolve is the key: the flag's, the file's, else the environment's ("" when
// none of them gives one).
func (o *APIKeyFlags) resolve(getenv func(string) string) (string, error) {
	switch {
	case o.Key != "" && o.File != "":
		return "", errors.New("give --api-key or --api-key-file, not both")
	case o.Key != "":
		return o.Key, nil
	case o.File != "":
		return readKeyFile(o.File)
	}
	return strings.TrimSpace(getenv(APIKeyEnv)), nil
}

func readKeyFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("--api-key-file %s: over %d bytes; a key file holds the key on its first line", name, maxKeyFile)
	}
	key, _, _ := strings.Cut(string(b), "\n")
	if key = strings.TrimSpace(key); key == "" {
		return "", fmt.Errorf("--api-key-file %s: the first line is empty", name)
	}
	return key, nil
}
