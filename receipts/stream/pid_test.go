package stream

import "os"

func osPid() int { return os.Getpid() }
