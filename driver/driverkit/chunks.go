package driverkit

import "iter"

// Chunks splits the indexes [0, n) of a batch (the leases of a
// RefreshBatch) into runs that fit one request: it yields each run's
// bounds lo, hi in order, the weights of its indexes summing to at most
// max, unless one index alone weighs more (it then has a run of its own).
// weight(i) is the cost of index i in a request (the operations of a
// transaction); a nil weight counts 1 for each, for runs of max indexes.
func Chunks(n, max int, weight func(i int) int) iter.Seq2[int, int] {
	return func(yield func(lo, hi int) bool) {
		for lo := 0; lo < n; {
			hi, sum := lo, 0
			for hi < n {
				w := 1
				if weight != nil {
					w = weight(hi)
				}
				if hi > lo && sum+w > max {
					break
				}
				sum += w
				hi++
			}
			if !yield(lo, hi) {
				return
			}
			lo = hi
		}
	}
}
