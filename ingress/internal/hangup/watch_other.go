//go:build !linux

package hangup

type watcher struct{}

func theWatcher() *watcher          { return nil }
func (w *watcher) add(c *Conn) bool { return false }
func (w *watcher) remove(c *Conn)   {}
