package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram: 64 sub-buckets per power of two,
// so a quantile is within 1/64 (1.6 %) of the true value. Adding a sample
// does not allocate, and histograms merge by addition.
type hist struct {
	counts [64 * 64]uint32
	n      int
	max    time.Duration
	sum    time.Duration
}

const subBits = 6

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits // >= 1
	return e<<subBits | int(v>>(e-1))&(1<<subBits-1)
}

// lowOf returns the smallest value of bucket b.
func lowOf(b int) int64 {
	e := b >> subBits
	if e == 0 {
		return int64(b)
	}
	return (1<<subBits | int64(b&(1<<subBits-1))) << (e - 1)
}

func (h *hist) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(int64(d))]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q <= 1), the middle of its bucket,
// or 0 for an empty histogram. q = 1 returns the exact maximum.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := int(q*float64(h.n) + 0.5)
	rank = max(rank, 1)
	seen := 0
	for b, c := range h.counts {
		seen += int(c)
		if seen >= rank {
			lo, hi := lowOf(b), lowOf(b+1)
			return min(time.Duration((lo+hi)/2), h.max)
		}
	}
	return h.max
}

func (h *hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
