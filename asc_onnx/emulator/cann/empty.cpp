// Nothing: check.sh is run on this once to generate its kernel_tiling.h and include links.
