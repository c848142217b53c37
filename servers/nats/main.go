// Command nats is the NATS server the tests of driver/natsdriver, bench
// and cmd/locker run as a process of their own (built by
// internal/proc.GoBinary): nats-server's own command line (flags and
// configuration file), at the version this module requires, kept out of
// every published go.mod.
package main

import (
	"flag"
	"os"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	opts, err := server.ConfigureOptions(fs, os.Args[1:], server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie(err.Error())
	}
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie(err.Error())
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	s.WaitForShutdown()
}
