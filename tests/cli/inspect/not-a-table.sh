echo "not a table at all" > x; $E inspect x
