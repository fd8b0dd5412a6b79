package sim

import (
	"fmt"
	"math"
)

// Rng is the backend's splitmix64 (backend/src/dist.rs), so a simulated
// replica draws its service times the way a real one does.
type Rng struct{ state uint64 }

// NewRng seeds an Rng.
func NewRng(seed uint64) Rng { return Rng{state: seed} }

// Uint64 returns the next 64 random bits.
func (r *Rng) Uint64() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Open01 is uniform in (0, 1]: never 0, so its logarithm is finite.
func (r *Rng) Open01() float64 {
	return float64((r.Uint64()>>11)+1) / float64(uint64(1)<<53)
}

// Float64 is uniform in [0, 1).
func (r *Rng) Float64() float64 {
	return float64(r.Uint64()>>11) / float64(uint64(1)<<53)
}

// Distribution is a service-time distribution of the backend.
type Distribution uint8

// The backend's distributions.
const (
	Fixed Distribution = iota
	Exp
	Normal // N(mean, sigma = mean) truncated at 0
)

// ParseDistribution reads the scenario's spelling.
func ParseDistribution(s string) (Distribution, error) {
	switch s {
	case "fixed", "":
		return Fixed, nil
	case "exp":
		return Exp, nil
	case "normal":
		return Normal, nil
	}
	return 0, fmt.Errorf("sim: distribution %q is not one of fixed, exp, normal", s)
}

// Draw draws a value with the given mean as dist.rs does: the same random
// numbers consumed in the same order, the same arithmetic (Go's log and cos
// may differ from the C library's in the last bit).
func (d Distribution) Draw(mean float64, r *Rng) float64 {
	switch d {
	case Exp:
		return -mean * math.Log(r.Open01())
	case Normal:
		u1 := r.Open01()
		u2 := r.Open01()
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		return math.Max(mean+mean*z, 0)
	}
	return mean
}
