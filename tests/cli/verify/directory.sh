mkdir d; $E verify d
