package ingress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// deadlineConn bounds every silence of a backend connection: each read and
// each write must make progress within timeout (nginx's proxy_read_timeout
// and proxy_send_timeout). A write also restarts the wait for the answer,
// so the response headers and every later body read are covered, and a
// backend that sends headers and then stalls is cut off. Moving a deadline
// is a timer update in the runtime poller: no allocation, no syscall.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// clientBody bounds the wait between two reads of a client's request body
// (nginx's client_body_timeout) with the server connection's read deadline.
// It stands in for both the request body and the response writer, so the
// proxy's error handler, which gets the writer, can tell a stalled client
// from a failed backend; one allocation serves both.
type clientBody struct {
	io.ReadCloser       // the request body
	http.ResponseWriter // the client's
	timeout             time.Duration
	timedOut            atomic.Bool
}

// Unwrap lets http.ResponseController reach the server's writer (flush,
// hijack for upgrades, deadlines).
func (b *clientBody) Unwrap() http.ResponseWriter { return b.ResponseWriter }

func (b *clientBody) Read(p []byte) (int, error) {
	rc := http.NewResponseController(b.ResponseWriter)
	// A writer without deadlines (a test recorder) only loses the bound.
	_ = rc.SetReadDeadline(time.Now().Add(b.timeout))
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		// At the end of the body the server starts reading on to notice a
		// closed connection; a deadline left behind would expire there and
		// cancel a request that is only waiting for its backend.
		_ = rc.SetReadDeadline(time.Time{})
	case err != nil:
		if isTimeout(err) {
			b.timedOut.Store(true)
		}
		// Marked, because the transport returns a body-read error as it is
		// and the proxy must not blame the endpoint for it.
		err = &clientBodyError{err}
	}
	return n, err
}

// clientBodyError is a failure to read the client's request body.
type clientBodyError struct{ err error }

func (e *clientBodyError) Error() string {
	return "reading the client's request body: " + e.err.Error()
}
func (e *clientBodyError) Unwrap() error { return e.err }

// isClientBodyError reports whether err came from reading the client's body.
func isClientBodyError(err error) bool {
	var ce *clientBodyError
	return errors.As(err, &ce)
}

// clientBodyTimedOut reports whether the request answered through w had a
// body that stalled past the client body timeout.
func clientBodyTimedOut(w http.ResponseWriter) bool {
	b, ok := w.(*clientBody)
	return ok && b.timedOut.Load()
}
