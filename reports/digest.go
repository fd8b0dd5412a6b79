package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prequalbench/prequalbench/artifacts"
)

// fileDigest is one artifact file and the head of its SHA-256.
type fileDigest struct {
	Path, Sum string
}

// digestHeading opens REPORT.md's digest appendix; Check reads the table
// under it back to name the artifact that changed.
const digestHeading = "## Artifact digests"

// artifactDigests hashes every artifact the campaign recorded: campaign.json
// and every file under runs/ (logs aside), whether the report reads it or
// not, so that `report --check` notices an edit to any of them. The
// report's own outputs, the lock, temp files, failed attempts and logs are
// not artifacts of the measurement.
func artifactDigests(dir string) ([]fileDigest, error) {
	var out []fileDigest
	add := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return badInput("reports: %v", err)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return fmt.Errorf("reports: %w", err)
		}
		sum := sha256.Sum256(b)
		out = append(out, fileDigest{filepath.ToSlash(rel), hex.EncodeToString(sum[:8])})
		return nil
	}
	if err := add(filepath.Join(dir, artifacts.CampaignFile)); err != nil {
		return nil, err
	}
	runs := filepath.Join(dir, artifacts.RunsDir)
	err := filepath.WalkDir(runs, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && path == runs && os.IsNotExist(err):
			return filepath.SkipDir
		case err != nil:
			return badInput("reports: %v", err)
		case d.IsDir() && d.Name() == "logs":
			return filepath.SkipDir
		case d.IsDir() || strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), ".tmp"):
			return nil
		}
		return add(path)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b fileDigest) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// writeDigests is the report's last section: the digest of every artifact.
func writeDigests(w io.Writer, ds []fileDigest) {
	fmt.Fprintf(w, "%s\n\n", digestHeading)
	fmt.Fprintf(w, "The first 64 bits of each artifact's SHA-256: `prequalbench report --check` rebuilds this table, so an edit to any artifact, read by the report or not, fails the check and is named.\n\n")
	fmt.Fprintf(w, "<details><summary>%d files</summary>\n\n", len(ds))
	var rows [][]string
	for _, d := range ds {
		rows = append(rows, []string{d.Path, d.Sum})
	}
	mdTable(w, []string{"file", "sha256 (first 16 hex)"}, rows)
	fmt.Fprintf(w, "</details>\n")
}

// changedArtifacts compares the digest tables of two renderings of
// REPORT.md and lists the files whose digest differs, appeared or went.
func changedArtifacts(onDisk, rebuilt []byte) []string {
	a, b := digestRows(onDisk), digestRows(rebuilt)
	var out []string
	for p, s := range b {
		if a[p] != s {
			out = append(out, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// digestRows reads the digest table of a REPORT.md: path → digest.
func digestRows(md []byte) map[string]string {
	rows := map[string]string{}
	_, table, ok := strings.Cut(string(md), digestHeading)
	if !ok {
		return rows
	}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 {
			continue
		}
		p, s := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if len(s) == 16 && strings.Trim(s, "0123456789abcdef") == "" {
			rows[p] = s
		}
	}
	return rows
}
