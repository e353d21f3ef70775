package harbor

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// plainImages are the base images whose tools a sandbox here has (sh,
// python3, coreutils): an image built from one of them with nothing
// installed runs as a workspace. Any other image's contents are unknown.
var plainImages = []string{"python", "ubuntu", "debian", "alpine", "busybox"}

// env is what a task's environment gives its workspace.
type env struct {
	workdir string            // the folder the task's paths are in (WORKDIR), absolute
	seed    map[string]string // files the image puts in workdir (COPY), workspace-relative
}

// readEnv reads a task's environment: environment/Dockerfile, or the image
// task.toml names. A reason is why the task cannot run here (a Dockerfile
// that installs anything, services, an image not known to be plain); err is
// a folder that cannot be read.
func readEnv(dir string, cfg *taskConfig) (e env, reason string, err error) {
	envDir := filepath.Join(dir, "environment")
	for _, compose := range []string{"docker-compose.yaml", "docker-compose.yml", "compose.yaml"} {
		if _, err := os.Stat(filepath.Join(envDir, compose)); err == nil {
			return e, fmt.Sprintf("environment/%s defines services; Docker Compose cannot run here", compose), nil
		}
	}
	b, err := readText(filepath.Join(envDir, "Dockerfile"), maxFile)
	if os.IsNotExist(err) {
		if img := cfg.Environment.DockerImage; img != "" {
			if why := plainImage(img); why != "" {
				return e, "task.toml's environment.docker_image " + why, nil
			}
			return e, "task.toml names the image " + img + " but not its WORKDIR: the task's paths have no folder here", nil
		}
		return e, "no environment/Dockerfile or environment.docker_image: nothing says what the task runs in", nil
	}
	if err != nil {
		return e, "", err
	}
	return dockerfile(envDir, b)
}

// dockerfile reads a Dockerfile that is one plain FROM, a WORKDIR and COPYs
// of the build context into it; anything else (RUN, ENV, ADD, USER, a second
// stage, …) is the reason it cannot run here.
func dockerfile(ctxDir, text string) (e env, reason string, err error) {
	e.seed = map[string]string{}
	from := 0
	type copyOp struct {
		line     int
		src      []string
		dst, raw string
	}
	var copies []copyOp
	for _, in := range dockerLines(text) {
		n, line := in.n, in.text
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		at := fmt.Sprintf("environment/Dockerfile:%d", n)
		switch strings.ToUpper(word) {
		case "FROM":
			if from++; from > 1 {
				return e, at + ": a second FROM (a multi-stage build) builds an image that cannot be built here", nil
			}
			if why := plainImage(firstArg(rest)); why != "" {
				return e, at + ": FROM " + why, nil
			}
		case "WORKDIR":
			if !path.IsAbs(rest) {
				rest = path.Join(e.workdir, rest)
			}
			e.workdir = path.Clean(rest)
		case "COPY":
			args := strings.Fields(rest)
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				if strings.HasPrefix(args[0], "--from") {
					return e, at + ": COPY --from copies out of another image, which cannot be built here", nil
				}
				args = args[1:]
			}
			if len(args) < 2 || strings.HasPrefix(rest, "[") {
				return e, at + ": a COPY the import does not read (" + line + ")", nil
			}
			dst := args[len(args)-1]
			if !path.IsAbs(dst) {
				if e.workdir == "" {
					return e, at + ": COPY to a relative path before any WORKDIR", nil
				}
				dst = path.Join(e.workdir, dst) + map[bool]string{true: "/"}[strings.HasSuffix(dst, "/")]
			}
			copies = append(copies, copyOp{n, args[:len(args)-1], dst, line})
		case "LABEL", "MAINTAINER", "CMD", "ENTRYPOINT", "EXPOSE":
			// Nothing a workspace needs.
		default:
			return e, fmt.Sprintf("%s: %s changes the image (%s), which cannot be built here", at, strings.ToUpper(word), clip(line, 60)), nil
		}
	}
	if from == 0 {
		return e, "environment/Dockerfile has no FROM", nil
	}
	if e.workdir == "" || e.workdir == "/" {
		return e, "environment/Dockerfile sets no WORKDIR: the task's paths have no folder to become the workspace", nil
	}
	for _, c := range copies {
		if why, err := e.copyIn(ctxDir, c.src, c.dst); err != nil || why != "" {
			if why != "" {
				why = fmt.Sprintf("environment/Dockerfile:%d: %s", c.line, why)
			}
			return e, why, err
		}
	}
	return e, "", nil
}

// copyIn adds what COPY src... dst puts into the workdir to the seed files.
func (e *env) copyIn(ctxDir string, srcs []string, dst string) (reason string, err error) {
	rel, ok := under(e.workdir, strings.TrimSuffix(dst, "/"))
	if !ok {
		return "COPY to " + dst + ", outside the WORKDIR " + e.workdir + ": only the workspace is imported", nil
	}
	intoDir := strings.HasSuffix(dst, "/") || len(srcs) > 1 || rel == "."
	for _, src := range srcs {
		if strings.ContainsAny(src, "*?[") {
			return "COPY " + src + ": wildcards are not imported", nil
		}
		if !cleanRel(path.Clean(src)) && path.Clean(src) != "." {
			return "COPY " + src + ": outside the build context", nil
		}
		from := filepath.Join(ctxDir, filepath.FromSlash(src))
		fi, err := os.Lstat(from)
		if err != nil {
			return "COPY " + src + ": " + err.Error(), nil
		}
		if !fi.IsDir() {
			to := rel
			if intoDir {
				to = path.Join(rel, path.Base(src))
			}
			if why, err := e.seedFile(from, to, "environment/"+src); err != nil || why != "" {
				return why, err
			}
			continue
		}
		// A folder's contents go into dst, as Docker copies them.
		err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || reason != "" {
				return err
			}
			r, _ := filepath.Rel(from, p)
			reason, err = e.seedFile(p, path.Join(rel, filepath.ToSlash(r)), "environment/"+path.Join(src, filepath.ToSlash(r)))
			return err
		})
		if err != nil || reason != "" {
			return reason, err
		}
	}
	return "", nil
}

func (e *env) seedFile(from, to, name string) (reason string, err error) {
	text, why, err := taskFile(from, name)
	if err != nil || why != "" {
		return why, err
	}
	e.seed[path.Clean(to)] = text
	return "", nil
}

// plainImage says why an image is not a plain base image; empty when it is.
func plainImage(ref string) string {
	name := strings.TrimPrefix(strings.TrimPrefix(ref, "docker.io/"), "library/")
	if i := strings.IndexAny(name, ":@"); i >= 0 {
		name = name[:i]
	}
	if slices.Contains(plainImages, name) {
		return ""
	}
	return fmt.Sprintf("%s: an image whose contents are not known here (plain bases: %s)", ref, strings.Join(plainImages, ", "))
}

// firstArg is FROM's image, past options like --platform.
func firstArg(s string) string {
	for _, f := range strings.Fields(s) {
		if !strings.HasPrefix(f, "--") {
			return f
		}
	}
	return ""
}

// instruction is one Dockerfile instruction and the line it starts on.
type instruction struct {
	n    int
	text string
}

// dockerLines are a Dockerfile's instructions in order, comments and blank
// lines dropped and continuations joined.
func dockerLines(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSpace(strings.TrimSuffix(t, "\\")) + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, instruction{start, strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, instruction{start, strings.TrimSpace(cur.String())})
	}
	return out
}

// under reports p relative to dir when p is dir or inside it.
func under(dir, p string) (string, bool) {
	p = path.Clean(p)
	if p == dir {
		return ".", true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir)+1:], true
	}
	return "", false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
