package main

import (
	"github.com/go-locker/locker/driver/memdriver"
)

// memSystems is locker on its in-process reference driver: the front-end's
// own cost, with no network.
func memSystems() []*system {
	return []*system{
		{
			name: "locker", server: "mem", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over memdriver (in-process backend, no network); contended cells: 4 drivers of one backend",
			open: openLockerMem,
		},
	}
}

func openLockerMem(_ *env, n int) (*instance, error) {
	b := memdriver.NewBackend()
	ds := make([]*memdriver.Driver, n)
	for i := range ds {
		ds[i] = b.Driver()
	}
	clients := lockerClients(ds)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return lockerHandle{clients[i].Mutex(key)}, nil
		},
		close: func() {},
	}, nil
}
