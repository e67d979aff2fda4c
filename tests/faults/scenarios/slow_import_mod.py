"""A module whose import never finishes (like a package that downloads at import time)."""
import time


def block_forever():
    time.sleep(3600)


block_forever()
