// Command ingressattack sends the ingress the two memory attacks of
// docs/robustness.md for a bounded time, on loopback: -mode body (clients
// sending large request bodies, as fast as they can) or -mode unread
// (clients asking for a large answer and never reading it). With -serve it
// is instead the backend: it drains request bodies and answers GET
// /big?bytes=N with N bytes.
//
//	ingressattack -serve 127.0.0.1:4001
//	ingressattack -mode body -target 127.0.0.1:8080 -conns 16 -size 32Mi -duration 10s
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	serve := flag.String("serve", "", "run the backend on this address instead")
	mode := flag.String("mode", "body", "body | unread")
	target := flag.String("target", "127.0.0.1:8080", "ingress proxy address")
	conns := flag.Int("conns", 16, "attacking connections")
	size := flag.String("size", "32Mi", "body size (body) or answer size (unread)")
	duration := flag.Duration("duration", 10*time.Second, "how long to attack")
	flag.Parse()
	if *serve != "" {
		log.Fatal(http.ListenAndServe(*serve, http.HandlerFunc(backend)))
	}
	q, err := resource.ParseQuantity(*size)
	if err != nil {
		fmt.Fprintf(os.Stderr, "-size %q: %v\n", *size, err)
		os.Exit(2)
	}
	n := q.Value()
	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				code := attackOnce(*mode, *target, n, end)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%s: %v\n", *mode, codes)
}

// attackOnce makes one attacking request and returns its status line's
// code (or the error).
func attackOnce(mode, target string, n int64, end time.Time) string {
	c, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		time.Sleep(10 * time.Millisecond)
		return "dial error"
	}
	defer c.Close()
	_ = c.SetDeadline(end.Add(time.Second))
	switch mode {
	case "body":
		fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", n)
		buf := make([]byte, 256<<10)
		for left := n; left > 0; {
			k := min(left, int64(len(buf)))
			if _, err := c.Write(buf[:k]); err != nil {
				break
			}
			left -= k
		}
		head := make([]byte, 12)
		if _, err := io.ReadFull(c, head); err != nil {
			return "no answer"
		}
		return string(head[9:12])
	default:
		// Ask, read the first bytes only, then hold the connection to
		// the end without reading.
		fmt.Fprintf(c, "GET /big?bytes=%d HTTP/1.1\r\nHost: x\r\n\r\n", n)
		head := make([]byte, 12)
		if _, err := io.ReadFull(c, head); err != nil {
			return "no answer"
		}
		time.Sleep(time.Until(end))
		return string(head[9:12])
	}
}

func backend(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
	w.Header().Set("Content-Length", strconv.Itoa(n))
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}
