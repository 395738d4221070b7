//go:build linux

package autostart_test

import (
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/app/autostart"
)

func Example() {
	dir, _ := os.MkdirTemp("", "autostart-example")
	defer os.RemoveAll(dir)
	os.Setenv("XDG_CONFIG_HOME", dir) // Linux: where the entry goes

	e := autostart.Entry{ID: "dev.gatehouse.app", Name: "Gatehouse", Exec: "/usr/bin/gatehouse-app", Args: []string{"--hidden"}}
	if err := e.Enable(); err != nil {
		fmt.Println(err)
		return
	}
	on, _ := e.Enabled()
	fmt.Println("starts at login:", on)
	e.Disable()
	on, _ = e.Enabled()
	fmt.Println("starts at login:", on)
	// Output:
	// starts at login: true
	// starts at login: false
}
