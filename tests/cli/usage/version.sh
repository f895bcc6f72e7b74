$E --version
