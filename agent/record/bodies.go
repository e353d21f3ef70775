package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// BodiesFile is the file, beside a session's trajectory, that holds every
// request body the session sent, in the order sent: one Body per line,
// appended as each request goes out (a cut session keeps all it sent). Its
// i-th line is the body of Session.Requests[i]. A replay re-sends them.
const BodiesFile = "requests.jsonl"

// Body is one line of BodiesFile.
type Body struct {
	// Path is the request's path under the base URL (/chat/completions,
	// /responses, /completions).
	Path string `json:"path"`
	// JSON is the body as sent when it is JSON, byte for byte (compacted
	// only where it spans lines); Text is a body that is not, as sent
	// (empty when none could be read).
	JSON json.RawMessage `json:"body,omitempty"`
	Text string          `json:"text,omitempty"`
}

// Bytes is the body to send again.
func (b *Body) Bytes() []byte {
	if b.JSON != nil {
		return b.JSON
	}
	return []byte(b.Text)
}

// AppendBody adds one request's body to the bodies file at file. The file
// is opened for each append, so nothing stays open between requests. A
// JSON body goes into the line as it is: one validating pass, no
// re-encoding (an agent's history makes bodies of megabytes, one per
// request).
func AppendBody(file, path string, body []byte) error {
	var line bytes.Buffer
	if json.Valid(body) {
		p, _ := json.Marshal(path)
		line.Grow(len(body) + len(p) + 20)
		line.WriteString(`{"path":`)
		line.Write(p)
		line.WriteString(`,"body":`)
		if bytes.ContainsAny(body, "\r\n") {
			json.Compact(&line, body)
		} else {
			line.Write(body)
		}
		line.WriteByte('}')
	} else {
		b, err := json.Marshal(Body{Path: path, Text: string(body)})
		if err != nil {
			return err
		}
		line.Write(b)
	}
	line.WriteByte('\n')
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(line.Bytes())
	return errors.Join(err, f.Close())
}

// maxBodyLine bounds one line of a bodies file: a request body is at most
// what a server takes (jspark serve: 32 MiB), twice over for escaping.
const maxBodyLine = 64 << 20

// ReadBodies reads a bodies file; an error names the file and line.
func ReadBodies(file string) ([]Body, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBodies(f, file)
}

func readBodies(r io.Reader, name string) ([]Body, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBodyLine)
	var out []Body
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var b Body
		if err := json.Unmarshal([]byte(line), &b); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if !strings.HasPrefix(b.Path, "/") {
			return nil, fmt.Errorf("%s:%d: a body line needs a path starting with /", name, n)
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
