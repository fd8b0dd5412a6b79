package ingress

import (
	"net/url"
	"strings"
)

// forwardablePath takes the raw path of a request target and returns the
// decoded path the router matches, or false when the path a backend
// receives would not be the path the router matched. The request is
// forwarded byte for byte, and the router matches the decoded path after
// resolving dot-segments and empty segments, so only paths that need no
// resolving are accepted: no "." or ".." segment (encoded or not), no "//",
// no backslash, and no encoded slash or backslash (%2F, %5C) that a backend
// could decode into a separator. "/secret/..%2Fapp" would otherwise match
// the /app route while the backend serves /secret. Nor a "#": a backend
// reads the path as ending there ("/admin#x" is /admin to it, but matches
// the route of "/"). A path without escapes costs no allocation.
func forwardablePath(raw string) (string, bool) {
	if strings.IndexByte(raw, '#') >= 0 {
		return "", false
	}
	p := raw
	if strings.IndexByte(raw, '%') >= 0 {
		for i := 0; i+2 < len(raw); i++ {
			if raw[i] != '%' {
				continue
			}
			switch raw[i+1 : i+3] {
			case "2f", "2F", "5c", "5C":
				return "", false
			}
		}
		var err error
		if p, err = url.PathUnescape(raw); err != nil {
			return "", false
		}
	}
	if p == "" || p[0] != '/' {
		return "", false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			return "", false
		case '/':
			seg := p[i+1:]
			if j := strings.IndexByte(seg, '/'); j >= 0 {
				seg = seg[:j]
				if j == 0 {
					return "", false // "//"
				}
			}
			if seg == "." || seg == ".." {
				return "", false
			}
		}
	}
	return p, true
}
