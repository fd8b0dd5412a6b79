package doclimits

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	readmeWords = 3000
	otherWords  = 1500
)

// Rendered tables sit between these markers (see reports/published); they
// are data, not prose, and do not count.
var rendered = regexp.MustCompile(`(?s)<!-- report [^>]*-->.*?<!-- /report -->`)

// words counts as wc -w does: runs of non-space.
func words(text string) int { return len(strings.Fields(rendered.ReplaceAllString(text, ""))) }

// generated reports whether a Markdown file is a report or a fixture that
// `prequalbench report` writes whole, which no one edits by hand.
func generated(path string) bool {
	base := filepath.Base(path)
	return base == "REPORT.md" || base == "COMPARE.md" ||
		strings.Contains(filepath.ToSlash(path), "/testdata/") || strings.HasPrefix(filepath.ToSlash(path), "testdata/")
}

func TestWords_CountsWhatWcCountsOutsideRenderedTables(t *testing.T) {
	text := "one two\nthree\n<!-- report d#S -->\n| a | b |\n<!-- /report -->\nfour"
	if got := words(text); got != 4 {
		t.Errorf("words = %d, want 4", got)
	}
}

func TestDocs_WithinTheirWordLimits(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	checked := 0
	for _, rel := range strings.Fields(string(out)) {
		if generated(rel) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		limit := otherWords
		if rel == "README.md" {
			limit = readmeWords
		}
		if n := words(string(b)); n > limit {
			t.Errorf("%s: %d words, over its limit of %d", rel, n, limit)
		}
		checked++
	}
	if checked < 5 {
		t.Errorf("checked %d Markdown files; the walk found too few", checked)
	}
}
