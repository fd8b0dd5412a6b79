package campaign

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/prequalbench/prequalbench/artifacts"
)

// FailedDir, in a campaign directory, keeps the failed attempts of runs
// that a resume ran again: FailedDir/<run dir>.<n>.
const FailedDir = "failed"

// maxSameSecond bounds the campaigns of one scenario started in the same
// second into one output directory.
const maxSameSecond = 1000

// createCampaignDir creates the directory of a new campaign and locks it.
// It uses Mkdir, which fails when the directory exists, so two campaigns
// started in the same second never share one: the second gets the id
// with a "-2" suffix, and so on. It returns the directory and the id.
func createCampaignDir(outDir, id string) (string, string, *dirLock, error) {
	if err := artifacts.MkdirAllSync(outDir); err != nil {
		return "", "", nil, fmt.Errorf("campaign: %w", err)
	}
	for n := 1; n <= maxSameSecond; n++ {
		name := id
		if n > 1 {
			name = fmt.Sprintf("%s-%d", id, n)
		}
		dir := filepath.Join(outDir, name)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", "", nil, fmt.Errorf("campaign: %w", err)
		}
		if err := artifacts.SyncDir(outDir); err != nil {
			return "", "", nil, err
		}
		lock, err := lockDir(dir)
		if err != nil {
			return "", "", nil, err
		}
		return dir, name, lock, nil
	}
	return "", "", nil, fmt.Errorf("campaign: %d campaigns named %s already in %s", maxSameSecond, id, outDir)
}

// keepFailedRun moves a failed run's directory to FailedDir/<run dir>.<n>
// and returns where it went.
func keepFailedRun(dir, runDir string) (string, error) {
	base := filepath.Join(dir, FailedDir, filepath.Base(runDir))
	if err := artifacts.MkdirAllSync(filepath.Dir(base)); err != nil {
		return "", fmt.Errorf("campaign: %w", err)
	}
	for n := 1; ; n++ {
		dst := fmt.Sprintf("%s.%d", base, n)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Rename(filepath.Join(dir, runDir), dst); err != nil {
			return "", fmt.Errorf("campaign: keeping the failed run: %w", err)
		}
		if err := artifacts.SyncDir(filepath.Dir(base)); err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, dst)
		return rel, nil
	}
}
