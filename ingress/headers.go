package ingress

import (
	"strings"

	"github.com/prequalbench/prequalbench/ingress/internal/h1"
)

// fieldHeaders lets the router read a request's header fields for an
// HTTPRoute's header matches. A pointer to the request's slice converts to
// router.Headers without allocating; the values it returns view the
// request's bytes and must not outlive it.
type fieldHeaders []h1.Field

// Get returns the value of the first field named name (case-insensitive).
func (f *fieldHeaders) Get(name string) (string, bool) {
	for i := range *f {
		fl := &(*f)[i]
		if strings.EqualFold(bytesString(fl.Name), name) {
			return bytesString(fl.Value), true
		}
	}
	return "", false
}
