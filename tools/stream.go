package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// The file tools run inside jspark, not the sandbox, so none of the
// sandbox's limits bind them: each streams and stops at its own bounds.
const (
	maxListEntries = 10000    // entries one list walks
	maxSearchBytes = 64 << 20 // bytes one search reads, over all files
	maxSearchLine  = 64 << 10 // bytes of a line search matches against
)

// line is one line of a file, kept up to a cap.
type line struct {
	text string // without its newline, at most the cap
	size int    // the whole line's bytes, newline included
	cut  bool   // text is a prefix
}

// lines reads a file line by line, holding at most keep bytes of a line.
type lines struct {
	r        *bufio.Reader
	keep     int
	offset   int   // bytes consumed
	fileSize int64 // from fstat; -1 if unknown
}

func newLines(f *os.File, keep int) *lines {
	l := &lines{r: bufio.NewReaderSize(f, 64<<10), keep: max(keep, 1), fileSize: -1}
	if fi, err := f.Stat(); err == nil {
		l.fileSize = fi.Size()
	}
	return l
}

// next is the next line, or nil at the end.
func (l *lines) next() (*line, error) { return l.read(true) }

// skip passes over a line without keeping it; false at the end.
func (l *lines) skip() (bool, error) {
	ln, err := l.read(false)
	return ln != nil, err
}

func (l *lines) read(keep bool) (*line, error) {
	var kept []byte
	size := 0
	for {
		chunk, err := l.r.ReadSlice('\n')
		size += len(chunk)
		if room := l.keep - len(kept); keep && room > 0 {
			kept = append(kept, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if size == 0 {
			return nil, nil
		}
		l.offset += size
		if !keep {
			return &skipped, nil
		}
		text := strings.TrimSuffix(string(kept), "\n")
		body := size
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			body--
		}
		return &line{text: text, size: size, cut: body > len(text)}, nil
	}
}

var skipped line

// readAll reads a whole file of at most limit bytes (0: no limit).
func readAll(f *os.File, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(f)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the file is over the sandbox's file-size limit of %d bytes", limit)
	}
	return b, nil
}

// errSearchDone stops the walk once the output is full.
var errSearchDone = errors.New("search output full")

// searcher collects matching lines up to the output limit, reading at most
// budget bytes in all and stopping when ctx ends.
type searcher struct {
	ctx    context.Context
	env    *Env
	re     *regexp.Regexp
	budget int64
	out    strings.Builder
	hits   int
	full   bool // the output limit was reached
	spent  bool // the byte budget ran out
}

func (s *searcher) file(rel string) error {
	f, err := s.env.Box.Open(rel)
	if err != nil {
		return nil // a file that changed kind under the walk is not a match
	}
	defer f.Close()
	lr := newLines(f, maxSearchLine)
	for n := 1; ; n++ {
		if n%1024 == 0 && s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if s.budget <= 0 {
			s.spent = true
			return errSearchDone
		}
		ln, err := lr.next()
		if err != nil || ln == nil {
			return nil
		}
		s.budget -= int64(ln.size)
		if !s.re.MatchString(ln.text) {
			continue
		}
		hit := fmt.Sprintf("%s:%d: %s\n", rel, n, ln.text)
		if s.out.Len()+len(hit) > s.env.OutputLimit {
			s.full = true
			return errSearchDone
		}
		s.hits++
		s.out.WriteString(hit)
	}
}

func (s *searcher) result() string {
	switch {
	case s.full:
		return s.out.String() + fmt.Sprintf("[... output limit reached after %d matches; more not shown: narrow the pattern or the path ...]\n", s.hits)
	case s.spent:
		return s.out.String() + fmt.Sprintf("[... search stopped after reading %d MiB; narrow the path ...]\n", maxSearchBytes>>20)
	case s.hits == 0:
		return "no matches"
	}
	return s.out.String()
}
