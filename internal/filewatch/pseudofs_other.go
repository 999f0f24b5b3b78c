//go:build !linux

package filewatch

// pseudoFS returns "": kernel pseudo file systems are recognised on Linux
// only.
func pseudoFS(string) string { return "" }
