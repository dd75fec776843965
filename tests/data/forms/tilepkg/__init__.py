"""A package of kernels laid out like TileKernels: shared helpers at the top, kernels in subfolders."""
