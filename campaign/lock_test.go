package campaign

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
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

// A --resume of a campaign that finished with every run ok changes
// nothing: no environment is started, campaign.json keeps its bytes (no
// new session, no new finish time), and the runs are returned.
func TestRun_ResumeOfAFinishedCampaignChangesNothing(t *testing.T) {
	res, err := runEnv(t, context.Background(), newFakeEnv(t), Options{Scenario: tinyScenario(t), OutDir: t.TempDir(), Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(res.Dir, artifacts.CampaignFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fe := newFakeEnv(t)
	later := func() time.Time { return fixedNow().Add(time.Hour) }
	res2, err := runEnv(t, context.Background(), fe, Options{ResumeDir: res.Dir, Now: later})
	if err != nil {
		t.Fatalf("resume of a finished campaign: %v", err)
	}
	if fe.setups != 0 || len(fe.algorithms) != 0 {
		t.Errorf("resume of a finished campaign started an environment (%d setups) or ran %v", fe.setups, fe.algorithms)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("campaign.json changed:\nbefore %s\nafter %s", before, after)
	}
	if len(res2.Runs) != len(res.Runs) {
		t.Errorf("resume returned %d runs, want the %d finished", len(res2.Runs), len(res.Runs))
	}
}
