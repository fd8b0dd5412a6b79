package campaign

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile, in a campaign directory, is flocked by the one process that
// runs or resumes the campaign and holds its pid. The kernel drops the
// lock when that process dies, even by kill -9, so a stale file never
// blocks a resume. The file is never removed: removing it would let two
// processes lock two different files under the same name.
const LockFile = ".lock"

// ErrLocked is returned when another process holds a campaign's lock.
var ErrLocked = errors.New("campaign directory is in use")

// dirLock is an exclusive flock on a campaign directory.
type dirLock struct{ f *os.File }

// lockDir takes the campaign directory's lock without waiting: a second
// run or resume of the same directory fails at once with ErrLocked,
// naming the holder's pid.
func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("campaign: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(f.Name()); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (by pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("campaign: %s: %w%s: another `campaign run` or `--resume` is running it; wait for it to end", dir, ErrLocked, holder)
		}
		return nil, fmt.Errorf("campaign: lock %s: %w", dir, err)
	}
	// The pid is only for the message above; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// unlock releases the lock (closing the file drops the flock).
func (l *dirLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
