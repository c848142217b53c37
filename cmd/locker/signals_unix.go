//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwarded are the signals that locker run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
