//go:build !unix

package gate

func isENOTDIR(err error) bool { return false }
