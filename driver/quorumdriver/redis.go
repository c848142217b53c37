package quorumdriver

import (
	"fmt"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

// NewRedis is [New] over one redisdriver member per client, each with
// redisdriver's default options: Redlock's deployment, N independent Redis
// servers (usually 3 or 5). The members' clients should not retry on their
// own (MaxRetries: -1): the front-end retries with the same owner, and a
// member that answers late has failed that call. The driver never closes
// the clients.
func NewRedis(clients []redis.UniversalClient, opts *Options) (*Driver, error) {
	members := make([]driver.Driver, len(clients))
	for i, c := range clients {
		m, err := redisdriver.New(c, nil)
		if err != nil {
			return nil, fmt.Errorf("quorumdriver: member %d: %w", i, err)
		}
		members[i] = m
	}
	return New(members, opts)
}
