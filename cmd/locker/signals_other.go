//go:build !unix

package main

import "os"

// forwarded are the signals that locker run passes on to the command.
var forwarded = []os.Signal{os.Interrupt}
