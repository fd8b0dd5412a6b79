package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/prequalbench/prequalbench/"

// upper are the top layers; a package outside them must not import them.
var upper = []string{"campaign", "cmd"}

func TestNoImportRunsUpward(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "backend":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || isUpper(filepath.ToSlash(rel)) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if dep, ok := strings.CutPrefix(p, module); ok && isUpper(dep+"/") {
				t.Errorf("%s imports %s: packages below campaign/ and cmd/ must not import them (move the shared type down)", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: the walk is not seeing the module", checked)
	}
}

func isUpper(rel string) bool {
	for _, u := range upper {
		if strings.HasPrefix(rel, u+"/") {
			return true
		}
	}
	return false
}
