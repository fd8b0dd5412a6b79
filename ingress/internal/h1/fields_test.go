package h1

import "testing"

func TestValidHost(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "example.com": true, "example.com:8080": true, "127.0.0.1:1": true, "a:0080": true, "a:65535": true,
		"[::1]": true, "[::1]:8080": true, "[::ffff:1.2.3.4]": true, "xn--bcher-kva.de": true, "my_service:8080": true, "a~b": true,
		"h#frag": false, "[::1": false, "[]": false, "[::1]x": false, "user@host": false, "a:b:c": false,
		"host:8o": false, "a b": false, "a/b": false, "a\\b": false, "h?q": false, "[::1]:8080:1": false,
		"h,evil": false, "a;b": false, "ex%61mple.com": false, "a%": false, ":80": false, ":": false, "a:": false,
		"a:65536": false, "a:123456": false, "[1.2.3.4]": false, "[a]": false, "[::1%]": false, "[fe80::1%25eth0]": false,
		"[example.com]:80": false, "[v1.x]": false,
	} {
		if got := ValidHost([]byte(v)); got != want {
			t.Errorf("ValidHost(%q) = %v, want %v", v, got, want)
		}
	}
}
