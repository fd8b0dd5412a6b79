package artifacts

import (
	"slices"
	"testing"
)

// A resume whose load takes another path (generators or not, or another
// count) differs in fact; the URLs may change between sessions (ports,
// addresses) and are not compared; a side without the fact is not.
func TestFactDifferences_LoadPath(t *testing.T) {
	cli := Environment{Load: &LoadPath{Path: LoadFromCLI, URLs: []string{"http://127.0.0.1:1"}}}
	cli2 := Environment{Load: &LoadPath{Path: LoadFromCLI, URLs: []string{"http://127.0.0.1:2"}}}
	gen := Environment{Load: &LoadPath{Path: LoadFromGenerators, Generators: 2}}
	gen4 := Environment{Load: &LoadPath{Path: LoadFromGenerators, Generators: 4}}
	for _, c := range []struct {
		a, b Environment
		want []string
	}{
		{cli, cli2, nil},
		{cli, gen, []string{"load: cli -> generators:2"}},
		{gen, gen4, []string{"load: generators:2 -> generators:4"}},
		{Environment{}, gen, nil},
	} {
		if got := FactDifferences(c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("%v vs %v: %v, want %v", c.a.Load, c.b.Load, got, c.want)
		}
	}
}
