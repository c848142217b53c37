package quorumdriver

import "github.com/go-locker/locker/driver"

// sift removes from ok the members whose lease in rs is in limbo (see
// internal/limbo: a give-back of that very grant may still be on its way)
// and returns them apart.
func (d *Driver) sift(key, owner string, rs []result[driver.Lease], ok []int) (counted, doubted []int) {
	for _, i := range ok {
		if d.limbo.Doubtful(key, owner, i, rs[i].v.Token) {
			doubted = append(doubted, i)
		} else {
			counted = append(counted, i)
		}
	}
	return counted, doubted
}
