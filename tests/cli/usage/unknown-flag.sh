$E build --bogus-flag
