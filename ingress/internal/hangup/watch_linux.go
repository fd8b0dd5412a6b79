package hangup

import (
	"sync"
	"syscall"
)

// watcher is the process's epoll set of client sockets and the goroutine
// that waits on it.
type watcher struct {
	epfd  int
	mu    sync.Mutex
	next  uint64
	conns map[uint64]*Conn
}

var global struct {
	once sync.Once
	w    *watcher
}

// theWatcher starts the watcher on first use; nil when epoll fails.
func theWatcher() *watcher {
	global.once.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		global.w = &watcher{epfd: fd, conns: map[uint64]*Conn{}}
		go global.w.run()
	})
	return global.w
}

// hupEvents: the peer's FIN (EPOLLRDHUP), once per arrival. EPOLLHUP and
// EPOLLERR (a reset) are always reported.
const hupEvents = uint32(syscall.EPOLLRDHUP) | 1<<31 // EPOLLET, negative in package syscall

// add registers c; false when its socket cannot be had.
func (w *watcher) add(c *Conn) bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	w.mu.Lock()
	w.next++
	c.id = w.next
	w.conns[c.id] = c
	w.mu.Unlock()
	ev := syscall.EpollEvent{Events: hupEvents, Fd: int32(uint32(c.id)), Pad: int32(uint32(c.id >> 32))}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	}); err != nil || cerr != nil {
		w.mu.Lock()
		delete(w.conns, c.id)
		w.mu.Unlock()
		return false
	}
	return true
}

// remove unregisters c before its socket is closed (the close would drop
// it from the set too, but only once no other descriptor shares it).
func (w *watcher) remove(c *Conn) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
			})
		}
	}
	w.mu.Lock()
	delete(w.conns, c.id)
	w.mu.Unlock()
}

// run waits for hangups for the life of the process. epoll_wait blocks
// one thread, as a blocking system call does.
func (w *watcher) run() {
	var events [64]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(w.epfd, events[:], -1)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			c := w.conns[id]
			w.mu.Unlock()
			if c != nil {
				c.hangUp()
			}
		}
	}
}
