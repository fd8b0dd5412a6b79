package scenario

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// catalogueFS holds every catalogue scenario, one YAML file per scenario,
// named <scenario>.yaml.
//
//go:embed catalogue/*.yaml
var catalogueFS embed.FS

// Names lists the catalogue's scenarios, sorted.
func Names() []string {
	entries, err := fs.ReadDir(catalogueFS, "catalogue")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Catalogue returns the catalogue scenario called name, parsed.
func Catalogue(name string) (*Scenario, error) {
	b, err := fs.ReadFile(catalogueFS, "catalogue/"+path.Clean(name)+".yaml")
	if err != nil {
		return nil, fmt.Errorf("scenario: no scenario %q in the catalogue; known: %s (or give a path to a YAML file)", name, strings.Join(Names(), ", "))
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	return s, nil
}

// Lookup returns the scenario named ref: a catalogue name, or a path to a
// YAML file (anything with a '/' or ending in .yaml or .yml, or an existing
// file).
func Lookup(ref string) (*Scenario, error) {
	isPath := strings.ContainsRune(ref, os.PathSeparator) || strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml")
	if !isPath {
		if _, err := os.Stat(ref); err != nil {
			return Catalogue(ref)
		}
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("scenario: no file %s; catalogue scenarios: %s", ref, strings.Join(Names(), ", "))
		}
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return s, nil
}
