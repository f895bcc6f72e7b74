$E verify nope.engram
