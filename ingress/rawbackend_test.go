package ingress

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawBackend is a loopback HTTP/1.1 backend under a test's full control: it
// records every request as it arrived, byte for byte (head, and a
// Content-Length or chunked body), and writes whatever answer returns for
// it, keeping the connection until answer asks to close it.
type rawBackend struct {
	addr   string
	answer func(i int, head string) (resp string, closeAfter bool)

	mu    sync.Mutex
	reqs  []string
	conns int
}

func startRawBackend(t *testing.T, answer func(i int, head string) (string, bool)) *rawBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{addr: l.Addr().String(), answer: answer}
	var wg sync.WaitGroup
	var open sync.Map
	t.Cleanup(func() {
		l.Close()
		open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			b.mu.Unlock()
			open.Store(c, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer open.Delete(c)
				b.serve(c)
			}()
		}
	}()
	return b
}

func (b *rawBackend) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		head, err := readHead(br)
		if err != nil {
			return
		}
		raw := head
		lower := strings.ToLower(head)
		if i := strings.Index(lower, "\ncontent-length:"); i >= 0 {
			v := head[i+len("\ncontent-length:"):]
			v = strings.TrimSpace(v[:strings.IndexByte(v, '\n')])
			n, _ := strconv.Atoi(v)
			body := make([]byte, n)
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			raw += string(body)
		} else if strings.Contains(lower, "\ntransfer-encoding: chunked") {
			for {
				line, err := br.ReadString('\n')
				raw += line
				if err != nil {
					return
				}
				n, _ := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
				if n == 0 {
					trailer, err := readHead(br)
					raw += trailer
					if err != nil {
						return
					}
					break
				}
				chunk := make([]byte, n+2)
				if _, err := io.ReadFull(br, chunk); err != nil {
					return
				}
				raw += string(chunk)
			}
		}
		b.mu.Lock()
		i := len(b.reqs)
		b.reqs = append(b.reqs, raw)
		b.mu.Unlock()
		resp, closeAfter := b.answer(i, head)
		if _, err := io.WriteString(c, resp); err != nil || closeAfter {
			return
		}
	}
}

// readHead reads lines up to and including the empty line.
func readHead(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return sb.String(), err
		}
		if line == "\r\n" || line == "\n" {
			return sb.String(), nil
		}
	}
}

// requests returns the requests received so far.
func (b *rawBackend) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.reqs...)
}

// connections is the number of connections accepted so far.
func (b *rawBackend) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns
}

// answerOK answers every request with a 2-byte 200.
func answerOK(int, string) (string, bool) {
	return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
}

// exchangeRaw sends request as it is on a new connection and returns all
// the client receives until the ingress closes the connection (the
// requests send Connection: close) or the test deadline passes.
func exchangeRaw(t *testing.T, addr, request string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(c)
	return string(out)
}

// statusLine is the first line of an answer.
func statusLine(s string) string {
	if i := strings.Index(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// headLines are the lines of a request's or answer's head, the first
// (request or status) line included.
func headLines(s string) []string {
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		s = s[:i]
	}
	return strings.Split(s, "\r\n")
}

// answerBody is what follows an answer's head.
func answerBody(s string) string {
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		return s[i+4:]
	}
	return ""
}
