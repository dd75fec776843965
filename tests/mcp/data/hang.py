"""A kernel file whose top level never finishes: the server must time out, not hang."""

while True:
    pass
