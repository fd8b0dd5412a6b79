package campaign

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --resume of a directory that is not a campaign's (a typo naming
// results/ or a home directory) is refused and leaves no lock file there.
func TestPrepare_ResumeOfANonCampaignDirLeavesNoLockFile(t *testing.T) {
	dir := t.TempDir()
	_, _, _, _, err := prepare(Options{ResumeDir: dir})
	if err == nil || !strings.Contains(err.Error(), "not a campaign directory") {
		t.Errorf("prepare = %v, want an error saying %s is not a campaign directory", err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left in a directory that is not a campaign (stat: %v)", LockFile, err)
	}
}
