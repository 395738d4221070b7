//go:build !linux

package proof

import (
	"context"
	"errors"
)

// errNoPrivate: a private keychain is started on Linux only.
var errNoPrivate = errors.New("a private keychain needs Linux")

type privateSession struct{}

func startPrivate(context.Context) (*privateSession, error) { return nil, errNoPrivate }
func (*privateSession) env() []string                       { return nil }
func (*privateSession) startDaemon(context.Context) error   { return errNoPrivate }
func (*privateSession) killDaemon() error                   { return errNoPrivate }
func (*privateSession) close()                              {}
