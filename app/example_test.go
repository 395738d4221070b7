package app_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/app"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

func ExampleNew() {
	home, err := os.MkdirTemp("", "gatehouse-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	st, err := store.Open(context.Background(), home, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// The example keeps its signing key in memory, not in your keychain.
	vault.InMemory()

	// A program passes fyne.io/fyne/v2/app.NewWithID(...) and then calls Run.
	a := test.NewApp()
	ui := app.New(a, st, &app.Options{Version: "0.1.0"})
	defer ui.Close()
	ui.ShowMain()
	fmt.Println(ui.Window().Title())
	// Output: Gatehouse
}

func ExampleProxyCommand() {
	fmt.Println(app.ProxyCommand("everything"))
	fmt.Println(app.ProxyCommand("my server"))
	// Output:
	// gatehouse proxy everything
	// gatehouse proxy 'my server'
}
