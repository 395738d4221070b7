// Package enforce applies a [confine.Plan] to the running process and then
// replaces the process with the confined server: the body of the hidden
// `gatehouse confine` command, which a proxy starts in place of a server
// whose registration asks for confinement.
//
// It is apart from package confine, which plans, so that only the gatehouse
// command links the Landlock library.
package enforce
