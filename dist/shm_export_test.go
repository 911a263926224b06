package dist

// SHMActive reports whether c runs its collectives over shared memory.
func SHMActive(c Comm) bool {
	tc, ok := c.(*tcpComm)
	return ok && tc.shm != nil
}

// SetSHMWindow sets the buffer size of shared-memory worlds connected from
// now on and returns a function restoring the previous one.
func SetSHMWindow(n int) func() {
	old := shmWindow
	shmWindow = n
	return func() { shmWindow = old }
}

// SetSHMDir sets the directory of the regions' files and returns a
// function restoring the previous one.
func SetSHMDir(dir string) func() {
	old := shmDir
	shmDir = dir
	return func() { shmDir = old }
}

// SHMDir is the directory of the regions' files.
func SHMDir() string { return shmDir }
