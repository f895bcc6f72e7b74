head -c 100 /dev/urandom > r.bin; $E verify r.bin
