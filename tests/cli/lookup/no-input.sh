$E lookup
