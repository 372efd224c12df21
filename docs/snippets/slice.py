"""slice_of(key, slices): the slice of an aggregate key, byte-for-byte queue-migrate's slice_of.

A message goes to the new broker when slice_of(key, slices_total) < slices_migrated.
"""
import hashlib
import json
import sys


def slice_of(key: str, slices: int) -> int:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % max(slices, 1)


# As a script: {"key": ..., "slices": ...} JSON lines on stdin, one slice per line on stdout.
if __name__ == "__main__":
    for line in sys.stdin.buffer:
        if line.strip():
            v = json.loads(line)
            print(slice_of(v["key"], v["slices"]))
