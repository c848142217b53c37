//go:build !unix

package testserver

import (
	"errors"
	"os"
)

func signalStop(*os.Process) error { return errors.ErrUnsupported }
func signalCont(*os.Process) error { return errors.ErrUnsupported }
