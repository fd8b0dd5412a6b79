// Package published keeps the measurements the docs publish equal to what
// `prequalbench report` renders from committed campaign directories.
//
// A Markdown file publishes a section of a campaign's REPORT.md between two
// markers; the directory is relative to the module root and the section is
// named by its heading:
//
//	<!-- report docs/measurements/2026-12-04-quickstart#Headline -->
//	...the section, as report renders it...
//	<!-- /report -->
//
// Refresh re-renders every block from the artifacts, so a table can neither
// drop a policy the campaign ran nor go stale; the package's test fails when
// a committed file differs from its refreshed self.
package published

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/reports"
)

const endMarker = "<!-- /report -->"

var looksLikeMarker = regexp.MustCompile(`^<!--\s*/?\s*report\b`)

var beginMarker = regexp.MustCompile(`(?m)^<!-- report ([^ #]+)#([^>]+?) -->\n`)

// Block is one published section: where it comes from.
type Block struct {
	Dir     string // campaign directory, relative to the module root
	Section string // heading text of the REPORT.md section
}

// Refresh returns doc with every block's body replaced by the section its
// marker names, rendered from the campaign directory under root. It also
// returns the blocks it found.
func Refresh(doc []byte, root string) ([]byte, []Block, error) {
	if err := checkMarkers(doc); err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	var blocks []Block
	rendered := map[string][]byte{}
	rest := doc
	for {
		loc := beginMarker.FindSubmatchIndex(rest)
		if loc == nil {
			out.Write(rest)
			return out.Bytes(), blocks, nil
		}
		b := Block{Dir: string(rest[loc[2]:loc[3]]), Section: strings.TrimSpace(string(rest[loc[4]:loc[5]]))}
		out.Write(rest[:loc[1]])
		rest = rest[loc[1]:]
		end := bytes.Index(rest, []byte(endMarker))
		if end < 0 {
			return nil, nil, fmt.Errorf("published: block %s#%s has no closing %q", b.Dir, b.Section, endMarker)
		}
		md, ok := rendered[b.Dir]
		if !ok {
			files, err := reports.Render(filepath.Join(root, filepath.FromSlash(b.Dir)), reports.Options{})
			if err != nil {
				return nil, nil, fmt.Errorf("published: %s: %w", b.Dir, err)
			}
			md = files[artifacts.ReportFile]
			rendered[b.Dir] = md
		}
		body, err := Section(md, b.Section)
		if err != nil {
			return nil, nil, fmt.Errorf("published: %s: %w", b.Dir, err)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, nil, fmt.Errorf("published: %s#%s: the section is empty", b.Dir, b.Section)
		}
		out.Write(body)
		rest = rest[end:]
		blocks = append(blocks, b)
	}
}

// Section returns the body of the section of a Markdown document headed
// title (at any level), up to the next heading of the same or a higher
// level, with surrounding blank lines trimmed and one newline at its end.
func Section(md []byte, title string) ([]byte, error) {
	lines := strings.SplitAfter(string(md), "\n")
	level, start := 0, -1
	for i, l := range lines {
		if n := headingLevel(l); n > 0 && strings.TrimSpace(l[n:]) == title {
			level, start = n, i+1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no section %q in REPORT.md", title)
	}
	end := len(lines)
	for i := start; i < len(lines); i++ {
		if n := headingLevel(lines[i]); n > 0 && n <= level {
			end = i
			break
		}
	}
	body := strings.Trim(strings.Join(lines[start:end], ""), "\n")
	return []byte(body + "\n"), nil
}

// headingLevel is the number of leading '#' of an ATX heading line, else 0.
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(line) || line[n] != ' ' {
		return 0
	}
	return n
}

// checkMarkers refuses a line that looks like a marker but is not one, and
// markers that do not pair up: either would turn a block into plain text
// that no test re-renders.
func checkMarkers(doc []byte) error {
	open := false
	for i, line := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == endMarker:
			if !open {
				return fmt.Errorf("published: line %d: %s without an opening marker", i+1, endMarker)
			}
			open = false
		case looksLikeMarker.MatchString(t):
			if !beginMarker.MatchString(line + "\n") {
				return fmt.Errorf("published: line %d: malformed marker %q, want <!-- report DIR#SECTION -->", i+1, t)
			}
			if open {
				return fmt.Errorf("published: line %d: a block opens inside another", i+1)
			}
			open = true
		}
	}
	return nil
}
