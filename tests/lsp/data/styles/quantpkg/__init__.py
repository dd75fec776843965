"""A kernel package: kernels in ``kernels/`` import their platform helpers relatively."""
