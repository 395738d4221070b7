package install_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/app/install"
)

// A client config entry that launches server "files" through the proxy
// installed with the running program.
func ExampleProxyPath() {
	proxy, err := install.ProxyPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		if errors.Is(err, install.ErrProxyNotFound) {
			fmt.Fprintln(os.Stderr, "hint: install Gatehouse from its package, or build both programs with make build")
		}
		return
	}
	entry, _ := json.Marshal(map[string]any{"command": proxy, "args": []string{"proxy", "files"}})
	fmt.Println(string(entry))
}
