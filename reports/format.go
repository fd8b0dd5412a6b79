package reports

import (
	"fmt"
	"math"
	"strings"
)

// Every number in the report goes through these functions: fixed precision
// chosen from the magnitude, so no float noise reaches the bytes.

// fmtMs prints a latency in milliseconds with 3–4 significant digits.
func fmtMs(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 0):
		return "∞"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// fmtRate prints requests per second.
func fmtRate(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

// fmtPct prints a fraction as a percentage.
func fmtPct(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0%"
	case math.Abs(v) < 0.0001:
		return fmt.Sprintf("%.4f%%", 100*v)
	default:
		return fmt.Sprintf("%.2f%%", 100*v)
	}
}

// fmtRatio prints a ratio such as "0.12×".
func fmtRatio(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 0):
		return "∞×"
	case a >= 10:
		return fmt.Sprintf("%.1f×", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f×", v)
	default:
		return fmt.Sprintf("%.3f×", v)
	}
}

// fmtP prints a p-value.
func fmtP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "—"
	case p < 0.001:
		return "< 0.001"
	default:
		return fmt.Sprintf("%.3f", p)
	}
}

// fmtFloat prints a plain number with up to 2 decimals.
func fmtFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 0):
		return "∞"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// formatter returns the value printer for a metric.
func formatter(key string) func(float64) string {
	switch key {
	case "throughput_rps", "goodput_rps":
		return fmtRate
	case "error_rate":
		return fmtPct
	}
	return fmtMs
}

// cell escapes text for a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
