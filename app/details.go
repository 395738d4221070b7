package app

// ProxyCommand returns the command an MCP client runs to reach the server
// called name through Gatehouse.
func ProxyCommand(name string) string {
	return "gatehouse proxy " + shellQuote(name)
}
