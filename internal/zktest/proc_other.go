//go:build !unix

package zktest

import (
	"errors"
	"os"
)

func signalStop(*os.Process) error { return errors.ErrUnsupported }
func signalCont(*os.Process) error { return errors.ErrUnsupported }
