package h1

import "testing"

func TestValidHost(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "example.com": true, "example.com:8080": true, "EXAMPLE.com:": true, "127.0.0.1:1": true,
		"[::1]": true, "[::1]:8080": true, "[fe80::1%25eth0]:80": true, "xn--bcher-kva.de": true, "a_b~c": true,
		"h,evil": true, // a sub-delim: valid in a registered name (RFC 3986 §3.2.2)
		"h#frag": false, "[::1": false, "[]": false, "[::1]x": false, "user@host": false, "a:b:c": false,
		"host:8o": false, "a b": false, "a/b": false, "a\\b": false, "h?q": false, "[::1]:8080:1": false,
	} {
		if got := ValidHost([]byte(v)); got != want {
			t.Errorf("ValidHost(%q) = %v, want %v", v, got, want)
		}
	}
}
