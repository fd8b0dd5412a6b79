package published

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/reports/reportstest"
)

var update = flag.Bool("update", false, "rewrite the published blocks from their campaigns")

// TestPublishedTablesMatchReport fails when any Markdown file of the module
// publishes a section that differs from what report renders from its
// committed campaign directory. `go test ./reports/published -update`
// (make docs) rewrites them.
func TestPublishedTablesMatchReport(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "target" || n == "results") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, blocks, err := Refresh(doc, root)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		total += len(blocks)
		if bytes.Equal(got, doc) {
			return nil
		}
		if *update {
			return os.WriteFile(path, got, 0o644)
		}
		t.Errorf("%s publishes tables that differ from what report renders from their campaigns; run make docs", path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 {
		t.Fatal("no published block found: the docs must publish their measurements through report")
	}
}

func TestSection_StopsAtSameOrHigherLevel(t *testing.T) {
	md := []byte("# T\n\n## A\n\nx\n\n### A1\n\ny\n\n## B\n\nz\n")
	got, err := Section(md, "A")
	if err != nil {
		t.Fatal(err)
	}
	if want := "x\n\n### A1\n\ny\n"; string(got) != want {
		t.Fatalf("Section(A) = %q, want %q", got, want)
	}
	if _, err := Section(md, "C"); err == nil {
		t.Fatal("a missing section must be an error")
	}
}

func TestRefresh_ReplacesStaleBodyAndRefusesUnclosed(t *testing.T) {
	dir := t.TempDir()
	// A block naming a directory that is no campaign is an error, not a pass.
	doc := []byte("<!-- report nowhere#Headline -->\nold\n<!-- /report -->\n")
	if _, _, err := Refresh(doc, dir); err == nil {
		t.Fatal("a block over a missing campaign must be an error")
	}
	if _, _, err := Refresh([]byte("<!-- report x#Headline -->\nold\n"), dir); err == nil {
		t.Fatal("an unclosed block must be an error")
	}
	plain := []byte("no blocks here\n")
	got, blocks, err := Refresh(plain, dir)
	if err != nil || len(blocks) != 0 || !bytes.Equal(got, plain) {
		t.Fatalf("Refresh(plain) = %q, %v, %v", got, blocks, err)
	}
}

func TestRefresh_RendersTheNamedSection(t *testing.T) {
	root := t.TempDir()
	if err := reportstest.Write(filepath.Join(root, "camp"), reportstest.Default(3)); err != nil {
		t.Fatal(err)
	}
	doc := []byte("intro\n<!-- report camp#Headline -->\nstale table\n<!-- /report -->\nafter\n")
	got, blocks, err := Refresh(doc, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0] != (Block{Dir: "camp", Section: "Headline"}) {
		t.Fatalf("blocks = %+v", blocks)
	}
	s := string(got)
	if strings.Contains(s, "stale table") || !strings.HasPrefix(s, "intro\n<!-- report camp#Headline -->\n") || !strings.HasSuffix(s, "<!-- /report -->\nafter\n") {
		t.Fatalf("Refresh kept the stale body or lost the frame:\n%s", s)
	}
	for _, alg := range []string{"prequal", "round-robin"} {
		if !strings.Contains(s, alg) {
			t.Errorf("the rendered Headline omits %s:\n%s", alg, s)
		}
	}
	again, _, err := Refresh(got, root)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("Refresh is not idempotent: %v", err)
	}
}

func TestRefresh_RefusesMarkersThatWouldHideATable(t *testing.T) {
	for name, doc := range map[string]string{
		"two spaces":   "<!--  report camp#Headline -->\n| t |\n",
		"orphan close": "| t |\n<!-- /report -->\n",
		"no section":   "<!-- report camp -->\n| t |\n<!-- /report -->\n",
		"nested":       "<!-- report a#H -->\n<!-- report b#H -->\n<!-- /report -->\n",
	} {
		if _, _, err := Refresh([]byte(doc), t.TempDir()); err == nil {
			t.Errorf("%s: Refresh accepted %q", name, doc)
		}
	}
}
