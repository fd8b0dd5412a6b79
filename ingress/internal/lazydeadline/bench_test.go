package lazydeadline_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/ingress/internal/lazydeadline"
	"github.com/prequalbench/prequalbench/ingress/internal/tcppair"
)

// The benchmarks compare lazy renewal with plain SetReadDeadline and
// SetWriteDeadline calls before every request, as the proxy and the prober
// would make them, on a loopback TCP connection.

const timeout = 5 * time.Second

// deadlines sets a connection's read and write deadlines for one request.
type deadlines interface {
	set(c net.Conn, now time.Time) error
}

type plain struct{}

func (plain) set(c net.Conn, now time.Time) error {
	if err := c.SetWriteDeadline(now.Add(timeout)); err != nil {
		return err
	}
	return c.SetReadDeadline(now.Add(timeout))
}

type lazy struct{ read, write time.Time }

func (l *lazy) set(c net.Conn, now time.Time) error {
	slack := lazydeadline.Slack(timeout)
	if d, renew := lazydeadline.Renew(l.write, now.Add(timeout), slack); renew {
		l.write = time.Time{}
		if err := c.SetWriteDeadline(d); err != nil {
			return err
		}
		l.write = d
	}
	if d, renew := lazydeadline.Renew(l.read, now.Add(timeout), slack); renew {
		l.read = time.Time{}
		if err := c.SetReadDeadline(d); err != nil {
			return err
		}
		l.read = d
	}
	return nil
}

func ways() []struct {
	name string
	new  func() deadlines
} {
	return []struct {
		name string
		new  func() deadlines
	}{
		{"plain", func() deadlines { return plain{} }},
		{"lazy", func() deadlines { return &lazy{} }},
	}
}

// BenchmarkDeadlines is the deadline calls alone: what lazy renewal can
// save at most per request.
func BenchmarkDeadlines(b *testing.B) {
	for _, w := range ways() {
		b.Run(w.name, func(b *testing.B) {
			client, _ := tcppair.New(b)
			d := w.new()
			b.ReportAllocs()
			for range b.N {
				if err := d.set(client, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRequest is one small request and answer on a kept loopback
// connection, with the deadlines set before each: what the saving is worth
// next to the exchange it guards.
func BenchmarkRequest(b *testing.B) {
	for _, w := range ways() {
		b.Run(w.name, func(b *testing.B) {
			client, server := tcppair.New(b)
			go func() {
				_, _ = io.Copy(server, server) // echo
			}()
			req := make([]byte, 200)
			resp := make([]byte, len(req))
			d := w.new()
			b.ReportAllocs()
			for range b.N {
				if err := d.set(client, time.Now()); err != nil {
					b.Fatal(err)
				}
				if _, err := client.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
