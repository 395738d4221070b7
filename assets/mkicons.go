//go:build ignore

// mkicons writes icon.ico and icon.icns from the committed icon-<n>.png
// renders: run it with `go generate` (or `go run mkicons.go`) in this folder
// after the renders change. TestIconContainers fails until it has run.
package main

import (
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/assets"
	"github.com/gatehouse-dev/gatehouse/assets/internal/iconfile"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkicons:", err)
		os.Exit(1)
	}
}

func run() error {
	var renders []iconfile.Render
	for _, n := range assets.Sizes() {
		b, err := os.ReadFile(assets.IconPNGName(n))
		if err != nil {
			return err
		}
		renders = append(renders, iconfile.Render{Size: n, PNG: b})
	}
	ico, err := iconfile.ICO(renders)
	if err != nil {
		return err
	}
	icns, err := iconfile.ICNS(renders)
	if err != nil {
		return err
	}
	if err := os.WriteFile(assets.ICOName, ico, 0o644); err != nil {
		return err
	}
	return os.WriteFile(assets.ICNSName, icns, 0o644)
}
