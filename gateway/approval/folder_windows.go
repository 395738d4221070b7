package approval

// checkFolder has nothing to check on Windows: file modes do not apply, and
// the home folder (in the user's profile) inherits the profile's access list,
// which keeps other users out.
func checkFolder(dir string) error { return nil }
