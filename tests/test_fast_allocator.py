"""keep_freed_memory: memory freed at a step's end is reused without new page faults."""

import platform
import subprocess
import sys

import pytest

PROBE = """
import resource, torch
from transformer_lib.fast.allocator import keep_freed_memory
print(keep_freed_memory() if {keep} else "")
sizes = [1536 * 1024, 1536 * 256, 1536 * 1000, 1536 * 768] * 4   # floats, like a step's
for _ in range(4):                                                 # activations, all freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt    # at the step's end
    xs = [torch.ones(n) for n in sizes]
    del xs
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def probe(keep: bool):
    """(what keep_freed_memory said, page faults of the last of four 'steps'), in a fresh
    process: the setting lasts for the process."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(keep=keep)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    said, faults = out.stdout.splitlines()
    return said, int(faults)


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_freed_memory_is_reused_without_page_faults():
    said, kept = probe(True)
    assert "keeps freed memory" in said
    _, default = probe(False)
    assert kept <= max(100, default // 10), (kept, default)


@pytest.mark.skipif(GLIBC, reason="elsewhere than glibc")
def test_other_c_libraries_are_left_alone():
    assert probe(True)[0] == ""
