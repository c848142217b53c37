//go:build !unix

package proc

import (
	"errors"
	"os"
)

func signalStop(*os.Process) error { return errors.ErrUnsupported }
func signalCont(*os.Process) error { return errors.ErrUnsupported }
