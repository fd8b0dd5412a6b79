package artifacts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempMarker is in the name of every temp file WriteFileAtomic creates
// (".<name>.tmp-<random>"); RemoveStaleTemp finds the ones a killed
// process left behind by it.
const TempMarker = ".tmp-"

// syncFile flushes f to stable storage. A package variable only so tests
// can see which files and directories were synced.
var syncFile = func(f *os.File) error { return f.Sync() }

// SyncDir fsyncs a directory, making the creation, rename or removal of
// its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	defer d.Close()
	if err := syncFile(d); err != nil {
		return fmt.Errorf("artifacts: sync %s: %w", dir, err)
	}
	return nil
}

// MkdirAllSync is os.MkdirAll that also fsyncs the parent of every
// directory it creates, so the new directories survive a crash.
func MkdirAllSync(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// RemoveStaleTemp removes, under dir, every temp file WriteFileAtomic
// left behind when its process was killed between create and rename. The
// caller must own dir exclusively (see the campaign lock): a temp file of
// a live writer would be removed too. It returns how many it removed.
func RemoveStaleTemp(dir string) (int, error) {
	// WalkDir does not descend into a symlinked root (a campaign resumed
	// through a link such as results/latest): walk what it points to.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0, fmt.Errorf("artifacts: removing stale temp files: %w", err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		name := d.Name()
		if d.Type().IsRegular() && strings.HasPrefix(name, ".") && strings.Contains(name, TempMarker) {
			if err := os.Remove(path); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("artifacts: removing stale temp files: %w", err)
	}
	return n, nil
}
