package main

import (
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
			return nil
		},
	})
}
