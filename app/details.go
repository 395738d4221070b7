package app

import "github.com/gatehouse-dev/gatehouse/internal/shellwords"

// ProxyCommand returns the command an MCP client runs to reach the server
// called name through Gatehouse.
func ProxyCommand(name string) string {
	return "gatehouse proxy " + shellwords.Quote(name)
}
