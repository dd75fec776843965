"""A kernel file that asks for far more memory than the server allows a job."""

HOG = bytearray(256 * 2**30)
