package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the command-line scenarios in testdata/script: what a
// person types and what they see.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("GATEHOUSE_HOME", env.WorkDir+"/home")
			// The keychain: make test runs the tests in a private D-Bus
			// session with gnome-keyring; scripts reach it through these.
			for _, k := range []string{"DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_DATA_HOME"} {
				env.Setenv(k, os.Getenv(k))
			}
			return nil
		},
	})
}
