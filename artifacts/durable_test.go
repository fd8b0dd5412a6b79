package artifacts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordSyncs replaces syncFile for the test and returns the names synced.
func recordSyncs(t *testing.T) *[]string {
	t.Helper()
	var synced []string
	orig := syncFile
	syncFile = func(f *os.File) error {
		synced = append(synced, f.Name())
		return orig(f)
	}
	t.Cleanup(func() { syncFile = orig })
	return &synced
}

func TestWriteFileAtomic_SyncsFileThenEveryDirectoryItTouched(t *testing.T) {
	root := t.TempDir()
	synced := recordSyncs(t)
	path := filepath.Join(root, "runs", "01-rep1-prequal", RunFile)
	if err := WriteFileAtomic(path, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "{}\n" {
		t.Fatalf("read back %q, %v", b, err)
	}
	got := *synced
	if len(got) != 4 {
		t.Fatalf("synced %q, want the two new directories' parents, the temp file and the run directory", got)
	}
	// Parents of the created directories, outermost first.
	if got[0] != root || got[1] != filepath.Join(root, "runs") {
		t.Errorf("directory syncs %q, want %s then its runs/", got[:2], root)
	}
	if base := filepath.Base(got[2]); !strings.HasPrefix(base, "."+RunFile+TempMarker) {
		t.Errorf("file sync of %s, want the temp file before its rename", got[2])
	}
	if got[3] != filepath.Dir(path) {
		t.Errorf("last sync %s, want the directory of the renamed file %s", got[3], filepath.Dir(path))
	}

	// A second write into the existing directory: file and directory only.
	*synced = nil
	if err := WriteJSON(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if len(*synced) != 2 || (*synced)[1] != filepath.Dir(path) {
		t.Errorf("rewrite synced %q, want the temp file and %s", *synced, filepath.Dir(path))
	}
}

func TestRemoveStaleTemp_RemovesOnlyWriteFileAtomicLeftovers(t *testing.T) {
	root := t.TempDir()
	keep := []string{CampaignFile, "runs/01/" + RunFile, "logs/backend.log", "runs/01/notes.tmp-1"}
	stale := []string{"." + CampaignFile + TempMarker + "123", "runs/01/." + RunFile + TempMarker + "9", "logs/.routes.yaml" + TempMarker + "x"}
	for _, f := range slices.Concat(keep, stale) {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveStaleTemp(root)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(stale) {
		t.Errorf("removed %d, want %d", n, len(stale))
	}
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", f, err)
		}
	}
	for _, f := range keep {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
}

// A campaign resumed through a symlink (results/latest -> the campaign):
// WalkDir does not follow a symlinked root, so the leftovers were kept.
func TestRemoveStaleTemp_FollowsASymlinkedCampaignDir(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "campaign")
	stale := filepath.Join(real, "runs", "01", "."+RunFile+TempMarker+"9")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "latest")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	n, err := RemoveStaleTemp(link)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s still there (%v)", stale, err)
	}
}
