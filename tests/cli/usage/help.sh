$E build --help
