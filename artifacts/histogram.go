package artifacts

import (
	"fmt"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in microseconds from 1 µs to 60 s
// with 3 significant figures.
const (
	HistogramLowest  = 1
	HistogramHighest = int64(60 * time.Second / time.Microsecond)
	HistogramSigFigs = 3
)

// NewHistogram returns an empty latency histogram with the project's bounds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(HistogramLowest, HistogramHighest, HistogramSigFigs)
}

// EncodeHistogram returns the compressed, base64 V2 encoding of h.
func EncodeHistogram(h *hdrhistogram.Histogram) ([]byte, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("artifacts: encode histogram: %w", err)
	}
	return b, nil
}

// DecodeHistogram reverses EncodeHistogram.
func DecodeHistogram(b []byte) (*hdrhistogram.Histogram, error) {
	h, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("artifacts: decode histogram: %w", err)
	}
	return h, nil
}

// Millis converts a histogram value (µs) to milliseconds.
func Millis(us int64) float64 { return float64(us) / 1000 }
